"""The pytest plugin, as a user's test session sees it: it is loaded from
the installed package's pytest11 entry point, in a separate pytest run."""
import subprocess
import sys
import textwrap

USER_TESTS = textwrap.dedent("""
    import pytest
    import torch


    def test_fixture_gives_the_device(neuron):
        x = torch.ones(3, device=neuron)
        assert x.device.type == "neuron" and (x + x).device.type == "neuron"


    @pytest.mark.no_fallback
    def test_native_only(neuron):
        torch.ones(3, device=neuron) * 2 + 1


    @pytest.mark.no_fallback
    def test_marked_with_a_fallback(neuron):
        torch.cumprod(torch.ones(3, device=neuron), 0)


    def test_unmarked_fallback(neuron):
        torch.cumprod(torch.ones(3, device=neuron), 0)
        torch.cumprod(torch.ones(4, device=neuron), 0)
""")


def _pytest(tmp_path, *options):
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", *options,
                           "test_user.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_marker_fixture_and_report(tmp_path):
    r = _pytest(tmp_path, "--neuron-report")
    out = r.stdout
    assert "1 failed, 3 passed" in out, out
    assert "FAILED test_user.py::test_marked_with_a_fallback" in out
    assert "aten::cumprod" in out and "@pytest.mark.no_fallback" in out
    report = out.split("neuron fallback report", 1)[1]
    assert "aten::cumprod" in report and "3 calls" in report and "2 tests" in report, report
    assert "test_user.py::test_marked_with_a_fallback" in report


def test_strict_makes_every_fallback_an_error(tmp_path):
    r = _pytest(tmp_path, "--neuron-strict")
    assert "2 failed, 2 passed" in r.stdout, r.stdout
    assert "FAILED test_user.py::test_unmarked_fallback" in r.stdout
    assert "NEURON_SIM_FALLBACK=error" in r.stdout  # the op itself raised, naming the switch

