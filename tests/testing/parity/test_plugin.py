"""The pytest plugin, as a user's test session sees it: it is loaded from
the installed package's pytest11 entry point, in a separate pytest run."""
import os
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



# The first example of a session pays one-time set-up; here it is made slow on
# purpose (0.5 s, over hypothesis's 200 ms deadline), so the test can fail.
SLOW_FIRST_EXAMPLE = textwrap.dedent("""
    import time

    from hypothesis import given, strategies as st

    first = [True]


    @given(st.integers())
    def test_first_example_pays_set_up(n):
        if first[0]:
            first[0] = False
            time.sleep(0.5)
""")


def _docs_first_parity_example() -> str:
    """docs/testing.md's first @given example, as a user would paste it."""
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[3] / "docs" / "testing.md").read_text()
    return next(code for code in re.findall(r"```python\n(.*?)```", page, re.S) if "@given" in code)


def test_hypothesis_needs_no_settings_line_on_neuron(tmp_path):
    """The plugin loads a profile without the deadline: the docs' first example
    (no settings line) and a test whose first example is slow both pass; with
    the plugin disabled the slow one fails on hypothesis's deadline."""
    example = _docs_first_parity_example()
    assert "settings" not in example, example
    (tmp_path / "test_docs_example.py").write_text(example)
    (tmp_path / "test_slow_first.py").write_text(SLOW_FIRST_EXAMPLE)
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_docs_example.py",
           "test_slow_first.py"]
    r = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout + r.stderr

    # Without CI in the environment: hypothesis loads its deadline-free "ci" profile when CI is set.
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    r = subprocess.run([*run[:-2], "-p", "no:torch_neuron_sim", "test_slow_first.py"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120, env=env)
    assert "1 failed" in r.stdout and ("DeadlineExceeded" in r.stdout or "Flaky" in r.stdout), r.stdout


def test_a_chosen_profile_is_kept(tmp_path):
    """--hypothesis-profile (here hypothesis's own default, deadline on) wins
    over the plugin's profile."""
    (tmp_path / "test_slow_first.py").write_text(SLOW_FIRST_EXAMPLE)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--hypothesis-profile",
                        "default", "test_slow_first.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "1 failed" in r.stdout, r.stdout
