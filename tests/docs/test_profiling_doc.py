"""docs/profiling.md as written: its first snippet runs unchanged, and its worked example's
figures are those of examples/profile_step.py. Only what a run cannot change is compared:
the modelled times of the native ops and copies (from their shapes and bytes) and which ops
fell back. Fallback times are measured host time, so they are not."""
import json
import re
from pathlib import Path

from conftest import run_python

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "profiling.md"


def test_first_snippet_runs_as_written(tmp_path):
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    r = run_python(f"import os; os.chdir({str(tmp_path)!r})\n" + code)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ESTIMATE (cost model, not a measurement)" in r.stdout
    assert "Self NEURON" in r.stdout and (tmp_path / "trace.json").exists()


def _section() -> str:
    text = DOC.read_text()
    return text.split("<!-- worked example: start", 1)[1].split("<!-- worked example: end -->", 1)[0]


def test_worked_example_is_the_scripts_run():
    r = run_python(f"""
        import json, sys
        sys.path.insert(0, {str(ROOT / "examples")!r})
        import profile_step as ex, torch_neuron_sim
        ex.step()
        torch_neuron_sim.clear_op_tracking()
        est = torch_neuron_sim.estimate(ex.step, profile="trn2", warmup=0)
        rows = {{r.name: [r.kind, r.count, f"{{r.seconds * 1e6:.1f}}"] for r in est.ops}}
        print(json.dumps({{"rows": rows, "fallbacks": torch_neuron_sim.get_fallback_ops()}}))
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    run = json.loads(r.stdout.splitlines()[-1])
    section = _section()
    table = re.findall(r"^\| `([^`]+)` \| (\w+) \| (\d+) \| ([\d.]+) \| \w+ \|$", section, re.M)
    assert table, "run `python examples/profile_step.py --write-doc`"
    for name, kind, count, us in table:
        assert name in run["rows"], f"{name} is not a row of this run"
        if kind != "fallback":  # modelled from shapes: the same on every run
            assert run["rows"][name] == [kind, int(count), us], name
    assert run["fallbacks"] == ["aten::mse_loss", "aten::mse_loss_backward"]
    assert "`aten::mse_loss`, `aten::mse_loss_backward` fell back to the CPU" in section
    assert "dominate the modelled step" in section
    assert "`aten::linear`" in section and "`aten::linear_backward`" in section
