"""The migration report: `python -m torch_neuron_sim report script.py` and
`with torch_neuron_sim.report() as r:` list exactly the ops that fell back
with the source lines that issued them, native ops, 64-bit downcasts,
unsupported features, peak HBM and eager compilations; printed even when
the script raises; --json, --fail-on-fallback, --map-cuda."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import torch_neuron_sim
from torch_neuron_sim import torch_versions


@pytest.fixture(autouse=True)
def default_native_ops():
    """These tests rely on the default table; other tests may have changed it."""
    torch_neuron_sim.native_ops.load()


ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""\
    import sys
    import torch
    dev = torch.accelerator.current_accelerator()
    x = torch.ones(16, 16, device=dev)
    for _ in range(3):
        y = torch.cumprod(x, dim=0)
    m = x.median()
    z = (x.double() @ x.double()).sum()
    for n in range(1, 5):
        torch.ones(n, 4, device=dev) * 2.0
    if len(sys.argv) > 1 and sys.argv[1] == "fail":
        torch.cummax(x, 0)
        raise ValueError("the script failed")
    """)


def line_of(marker):
    """The line number in this file of the line ending with `# marker`."""
    with open(__file__) as f:
        for i, line in enumerate(f, 1):
            if line.rstrip().endswith(f"# {marker}"):
                return i
    raise LookupError(marker)


def run_report(tmp_path, *opts, script=SCRIPT, script_args=(), env=None):
    path = tmp_path / "train.py"
    path.write_text(script)
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "torch_neuron_sim", "report", *opts, str(path), *script_args],
                          capture_output=True, text=True, env=full_env, timeout=120, cwd=tmp_path)


MEASURES = ("bytes_copied", "seconds", "copy_seconds")


def _counted(fallbacks: list[dict]) -> list[dict]:
    """The fallback entries without their measured time and bytes, which
    must be there: a fallback copies its inputs to the host and back."""
    for f in fallbacks:
        assert f["bytes_copied"] > 0 and f["seconds"] > 0 and 0 < f["copy_seconds"] <= f["seconds"], f
    return [{k: v for k, v in f.items() if k not in MEASURES} for f in fallbacks]


def test_report_lists_exact_fallbacks_with_source_lines(tmp_path):
    out = tmp_path / "report.json"
    r = run_report(tmp_path, "--json", "--output", str(out), "--many-shapes", "4")
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    script = str(tmp_path / "train.py")
    assert _counted(data["fallback_ops"]) == [
        {"op": "aten::cumprod", "count": 3, "sites": [{"site": f"{script}:6", "count": 3}]},
        {"op": "aten::median", "count": 1, "sites": [{"site": f"{script}:7", "count": 1}]},
    ]
    native = {n["op"]: n["count"] for n in data["native_ops"]}
    assert native["aten::mm"] == 1 and native["aten::ones"] == 5 and native["aten::mul.Tensor"] == 4
    assert {"op": "aten::mm", "float64": 2, "int64": 0} in data["downcasts_64bit"]
    assert data["host_casts_64bit"] == 2
    assert data["unsupported_features"] == []
    (mem,) = data["memory"]
    assert mem["device"] == "neuron:0" and 0 < mem["peak_bytes"] <= mem["peak_reserved_bytes"] < mem["capacity_bytes"]
    assert mem["capacity_bytes"] == torch.neuron.get_device_properties(0).total_memory
    assert mem["fraction"] == mem["peak_reserved_bytes"] / mem["capacity_bytes"]  # what must fit: the segments
    comp = data["compilation"]
    assert comp["distinct_signatures"] >= 10
    # torch.ones and mul saw 4 (and 5) shapes: flagged at --many-shapes 4
    assert {m["op"] for m in comp["ops_with_many_shapes"]} == {"aten::ones", "aten::mul.Tensor"}
    assert data["exit_status"] == 0 and data["error"] is None


def test_report_printed_when_script_raises(tmp_path):
    r = run_report(tmp_path, script_args=("fail",))
    assert r.returncode == 1
    assert "ValueError: the script failed" in r.stderr  # the traceback
    text = r.stdout
    assert "torch_neuron_sim migration report" in text
    assert "aten::_cummax_helper" in text and "train.py:12" in text
    assert "The program raised: ValueError: the script failed" in text


def test_fail_on_fallback_and_map_cuda(tmp_path):
    r = run_report(tmp_path, "--fail-on-fallback")
    assert r.returncode == 3 and "--fail-on-fallback: 2 op(s) fell back" in r.stderr
    cuda_script = textwrap.dedent("""\
        import torch
        assert torch.cuda.is_available()
        a = torch.ones(4, 4, device="cuda")
        b = torch.ones(4, 4).cuda() + a.to("cuda:0")
        print(a.device, b.device)
        """)
    r = run_report(tmp_path, "--fail-on-fallback", "--map-cuda", script=cuda_script)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("neuron:0 neuron:0\n")
    assert "none: every op ran natively" in r.stdout


def test_report_context_manager(tracked):
    x = torch.ones(8, device="neuron")
    with torch_neuron_sim.report() as r:
        torch.logcumsumexp(x, 0)  # site A
        torch.logcumsumexp(x, 0)  # site B
        x + 1
    (fb,) = r.data["fallback_ops"]
    assert fb["op"] == "aten::_logcumsumexp" and fb["count"] == 2
    assert [s["site"] for s in fb["sites"]] == [f"{__file__}:{line_of('site A')}", f"{__file__}:{line_of('site B')}"]
    assert r.fallback_ops == ["aten::_logcumsumexp"]
    # add, and the allocation kernels that receive the fallbacks' results
    assert {n["op"] for n in r.data["native_ops"]} - {"aten::empty", "aten::empty_strided"} == {"aten::add.Tensor"}
    assert "aten::_logcumsumexp" in r.text()
    json.loads(r.to_json())
    # Outside the window nothing is recorded.
    torch.logcumsumexp(x, 0)
    assert r.data["fallback_ops"][0]["count"] == 2


def test_report_read_after_more_work_shows_only_its_window(tracked):
    x = torch.ones(256, device="neuron")
    with torch_neuron_sim.report() as r:
        y = torch.sin(x)
        del y
    # Work after the window, before the report is first read.
    big = torch.ones(1 << 18, device="neuron") * 2.0
    torch.cos(x).cpu()
    data = r.data
    assert {n["op"] for n in data["native_ops"]} == {"aten::sin"}
    timeline = data["device_timeline"]
    assert {o["name"] for o in timeline["ops"]} <= {"aten::sin", "compile aten::sin"}  # its first signature compiles
    assert timeline["events_total"] == len(timeline["events"]) == sum(o["count"] for o in timeline["ops"])
    assert data["host_copies"]["count"] == 0
    (mem,) = data["memory"]
    assert mem["peak_bytes"] < big.numel() * 4
    (series,) = data["memory_timeline"]
    assert series["events"] == 2  # sin's result, allocated and freed
    assert r.data is data  # built once


def test_hbm_series_and_peak_cards_count_the_same_bytes(tracked):
    """The HBM chart's allocated line sums blocks in their size classes and
    its reserved line the segments, as the peak cards do: their maxima are
    the cards' peaks, and empty_cache() shows as reserved falling."""
    torch.neuron.empty_cache()
    with torch_neuron_sim.report() as r:
        a = torch.empty(1000, dtype=torch.uint8, device="neuron")  # 1 KiB block
        b = torch.empty(3 * 2**20 + 1, dtype=torch.uint8, device="neuron")  # rounded up to 3.5 MiB
        peak_allocated = torch.neuron.max_memory_allocated()
        del a, b
        torch.neuron.empty_cache()
        after = torch.neuron.memory_reserved()
    (mem,) = r.data["memory"]
    (series,) = r.data["memory_timeline"]
    assert mem["peak_bytes"] == peak_allocated > 3 * 2**20 + 1000  # size classes, not the bytes asked for
    assert max(series["bytes"]) == mem["peak_bytes"]
    assert max(series["reserved_bytes"]) == mem["peak_reserved_bytes"] >= mem["peak_bytes"]
    assert series["reserved_bytes"][-1] == after < mem["peak_reserved_bytes"]  # segments returned
    assert series["events"] == 4  # two allocations, two frees; segments add points, not events
    assert all(r >= b for r, b in zip(series["reserved_bytes"], series["bytes"]))


def test_report_leaves_the_programs_own_memory_history(tracked):
    x = torch.ones(128, device="neuron")
    torch.neuron.memory._record_memory_history(context=None)
    try:
        with torch_neuron_sim.report() as r:
            y = torch.exp(x)
            del y
        trace = torch.neuron.memory._snapshot()["device_traces"][0]
        assert [e["action"] for e in trace[-3:]] == ["alloc", "free_requested", "free_completed"]
        (series,) = r.data["memory_timeline"]
        assert series["events"] == 2
        with torch_neuron_sim.report():
            torch.exp(x)
        # Still recording, with the earlier entries.
        assert len(torch.neuron.memory._snapshot()["device_traces"][0]) == len(trace) + 3
    finally:
        torch.neuron.memory._record_memory_history(None, clear_history=True)


def test_report_records_unsupported_features_and_backward_ops(tracked):
    x = torch.ones(4, device="neuron", requires_grad=True)
    with torch_neuron_sim.report() as r:
        try:
            torch.func.jvp(torch.sin, (x.detach(),), (x.detach(),))
        except NotImplementedError:
            pass
        torch.sinh(x).sum().backward()  # sinh forward
    assert r.data["unsupported_features"] == [{"feature": "forward-mode AD", "count": 1}]
    sites = {f["op"]: [s["site"] for s in f["sites"]] for f in r.data["fallback_ops"]}
    assert sites["aten::sinh"] == [f"{__file__}:{line_of('sinh forward')}"]
    # cosh runs in the backward pass, on the autograd engine's device thread: no Python line
    assert sites["aten::cosh"] == ["<backward pass>"]


def test_collect_env():
    r = subprocess.run([sys.executable, "-m", "torch_neuron_sim.collect_env"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"PyTorch version: {torch_versions.current().tested}" in r.stdout
    assert f"torch_neuron_sim version: {torch_neuron_sim.__version__}" in r.stdout
    assert f"native-op table: {torch_versions.current().native_ops} (" in r.stdout
    assert "HBM per device: 24 GiB" in r.stdout


def test_report_of_the_example(tmp_path):
    """What `make demo` ends with: the example trains natively; sampling falls back."""
    example = ROOT / "examples" / "transformer_lm.py"
    line = next(i for i, text in enumerate(example.read_text().splitlines(), 1) if "torch.multinomial(" in text)
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-m", "torch_neuron_sim", "report", "--json", "--output", str(out),
                        str(example), "--steps", "1", "--generate", "3"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert _counted(data["fallback_ops"]) == [
        {"op": "aten::multinomial", "count": 3, "sites": [{"site": f"{example}:{line}", "count": 3}]}]
    native = {n["op"] for n in data["native_ops"]}
    assert {"aten::_scaled_dot_product_fused_attention_overrideable", "aten::embedding", "aten::linear"} <= native
    assert data["unsupported_features"] == [] and data["memory"][0]["peak_bytes"] > 0
