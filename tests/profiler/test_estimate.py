"""estimate(), report --timeline, NEURON_SIM_TIMING=model and
torch_neuronx.NeuronProfiler over the simulated timeline (docs/profiling.md)."""
import json
import subprocess
import sys
import time

import pytest
import torch

import torch_neuron_sim
from torch_neuron_sim import profiler
from torch_neuron_sim.torch_neuronx import NeuronProfiler, NRTProfilerError
from conftest import run_python


pytestmark = pytest.mark.usefixtures("quiet_fallbacks")  # conftest.py


def mlp_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)).to("neuron")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 64).to("neuron"), torch.randint(0, 8, (32,)).to("neuron")

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def test_estimate_of_a_training_step():
    step = mlp_step()
    est = torch_neuron_sim.estimate(step, profile="trn2")
    assert (est.profile, est.lnc) == ("trn2", 2)
    names = {r.name for r in est.ops}
    assert {"aten::linear", "aten::linear_backward"} <= names  # one op each, as the device runs nn.Linear
    # The buckets add up to the modelled time of every event; one stream here.
    assert sum(est.breakdown.values()) == pytest.approx(est.total_seconds)
    assert sum(r.seconds for r in est.ops) == pytest.approx(est.total_seconds)
    assert est.breakdown["launch"] > 0 and est.breakdown["memory"] > 0
    assert est.breakdown["compile"] == 0 and est.compile_seconds > 0  # the warm-up step compiled
    lines = str(est).splitlines()
    assert lines[0] == ("ESTIMATE (cost model, not a measurement): one step on trn2 at LNC=2, "
                        "one logical NeuronCore per device")
    assert lines[1].startswith(f"total {est.total_seconds * 1e3:.3f} ms per step (busiest stream)")
    # one row per op, most expensive first, with its calls and modelled microseconds
    # the step's launches, and what adaptive eager would make of them (docs/semantics.md)
    assert lines[3] == f"launches: {est.launches}; adaptive eager would make {est.adaptive_launches}"
    assert 0 < est.adaptive_launches < est.launches
    rows = [line.split() for line in lines[6:] if not line.startswith("... ")]
    assert [(r[0], int(r[1]), float(r[2])) for r in rows] == [
        (o.name[:44], o.count, round(o.seconds * 1e6, 1)) for o in est.ops[:20]]
    assert json.loads(json.dumps(est.to_dict()))["estimate"] is True
    # The model in force outside is untouched.
    assert profiler.cost_model()["profile"] == torch_neuron_sim._C._machine()["profile"]


def test_estimates_follow_the_chip():
    x = torch.randn(4096, 4096).to("neuron")
    t2 = torch_neuron_sim.estimate(lambda: x * 2, profile="trn2").total_seconds
    t3 = torch_neuron_sim.estimate(lambda: x * 2, profile="trn3").total_seconds
    t2_lnc1 = torch_neuron_sim.estimate(lambda: x * 2, profile="trn2", lnc=1).total_seconds
    launch = profiler.cost_model()["launch_overhead_s"]
    assert (t2 - launch) / (t3 - launch) == pytest.approx(4.9 / 2.9, rel=1e-3)
    assert (t2_lnc1 - launch) == pytest.approx(2 * (t2 - launch), rel=1e-3)


def test_fallbacks_and_transfers_are_their_own_buckets():
    x = torch.randn(64, 64)

    def step():
        d = x.to("neuron")
        return torch.trace(d).item()
    est = torch_neuron_sim.estimate(step, warmup=0)
    assert est.breakdown["transfer"] > 0 and est.breakdown["fallback"] > 0
    assert [r for r in est.ops if r.name == "aten::trace"][0].bound == "fallback"


def test_model_timing_for_event_elapsed_time():
    a = torch.randn(2048, 2048).to("neuron")
    profiler._C._prof_set_model_clock(True)
    try:
        start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
        start.record()
        with profiler.timeline() as t:
            for _ in range(4):
                a + a
        end.record()
        end.synchronize()
        ms = start.elapsed_time(end)
    finally:
        profiler._C._prof_set_model_clock(False)
    assert ms == pytest.approx(sum(e["seconds"] for e in t.events) * 1e3, rel=1e-6)
    start.record()
    time.sleep(0.05)  # host time: no device work at all
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 50  # back to wall time, where the host's sleep counts


TIMING_PROBE = """
    import time, torch, torch_neuron_sim
    from torch_neuron_sim import profiler
    a = torch.randn(1024, 1024).to("neuron")
    a + a  # compiled once here: the timed add is modelled without a compile
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    start.record()
    with profiler.timeline() as t:
        a + a
    time.sleep(0.2)
    end.record()
    end.synchronize()
    print(start.elapsed_time(end), sum(e["seconds"] for e in t.events) * 1e3)
"""


def test_the_timing_variable_picks_the_clock_of_event_elapsed_time():
    """NEURON_SIM_TIMING=model: Event.elapsed_time is the modelled device time
    of the work between the events (the host's sleep adds nothing); =wall
    (the default): the host's time, sleep included; anything else: a clear
    error at import."""
    r = run_python(TIMING_PROBE, env={"NEURON_SIM_TIMING": "model"})
    assert r.returncode == 0, r.stderr
    elapsed, modelled = map(float, r.stdout.split())
    assert modelled > 0 and elapsed == pytest.approx(modelled, abs=1e-3)  # ms, kept to the microsecond
    r = run_python(TIMING_PROBE, env={"NEURON_SIM_TIMING": "wall"})
    assert r.returncode == 0, r.stderr
    elapsed, modelled = map(float, r.stdout.split())
    assert elapsed >= 200 > modelled
    r = run_python("import torch, torch_neuron_sim", env={"NEURON_SIM_TIMING": "fast"})
    assert r.returncode != 0 and "NEURON_SIM_TIMING='fast': use 'wall' (the default) or 'model'" in r.stderr


def test_report_timeline_writes_a_trace(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\nx = torch.randn(16, 16).to('neuron')\ny = (x @ x).relu().sum().item()\n")
    out = tmp_path / "trace.json"
    r = subprocess.run([sys.executable, "-m", "torch_neuron_sim", "report", "--timeline", str(out), str(script)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Simulated device timeline: ESTIMATE" in r.stdout and f"trace written to {out}" in r.stdout
    trace = json.loads(out.read_text())
    kernels = {e["name"] for e in trace["traceEvents"] if e.get("cat") == "kernel"}
    assert {"aten::mm", "aten::relu"} <= kernels


def test_report_model_has_the_estimated_device_timeline():
    """The migration report's model (text, JSON, page) carries the device
    timeline: modelled time by bucket and per op, the events on their lanes."""
    a = torch.randn(64, 64).to("neuron")
    with torch_neuron_sim.report() as r:
        b = (a @ a).relu()
        torch.trace(b)  # a fallback round trip
        torch.randn(3, 37).to("neuron").exp()  # a new signature: it compiles
    t = r.data["device_timeline"]
    # the summary's first-step compile time is the compile events the timeline draws
    assert t["compile_seconds"] == pytest.approx(t["breakdown"]["compile"]) and t["compile_seconds"] > 0
    from torch_neuron_sim.migration_report import page as report_html
    assert f"{t['compile_seconds'] * 1e3:.0f} ms of it compiling new op signatures" in report_html.render(r.data)
    assert t["profile"] == profiler.cost_model()["profile"] and t["estimate"] is True
    ops = {o["name"]: o for o in t["ops"]}
    assert ops["aten::mm"]["count"] == 1 and ops["aten::trace"]["fallback"] > 0
    assert t["events_total"] == len(t["events"]) >= 3
    assert {e["lane"] for e in t["events"]} == {"neuron:0 stream 0"}
    # one stream: its busy time is the sum of its events
    assert t["total_seconds"] == pytest.approx(sum(e["dur_ms"] for e in t["events"]) / 1e3, rel=1e-3)
    assert "Simulated device timeline: ESTIMATE" in r.text()
    json.dumps(r.data)  # plain data


def test_neuron_profiler_compatibility(tmp_path):
    a = torch.randn(32, 32).to("neuron")
    with NeuronProfiler(pytorch_trace_file=tmp_path / "pt.json", neuron_output_dir=tmp_path / "out",
                        event_filters=["kernel"]) as p:
        assert p.is_active()
        a @ a
        a.cpu()
    assert not p.is_active()
    assert "aten::mm" in {e.key for e in p.key_averages()}
    dev = json.loads((tmp_path / "out" / "neuron_timeline.json").read_text())
    assert dev["estimate"] is True and {e["kind"] for e in dev["events"]} == {"kernel"}
    assert any(e.get("cat") == "kernel" for e in json.loads((tmp_path / "pt.json").read_text())["traceEvents"])
    with pytest.raises(NRTProfilerError, match="not active"):
        p.stop()
    p.start()
    with pytest.raises(NRTProfilerError, match="already active"):
        p.start()
    p.stop()


def test_estimate_of_a_compiled_step(tmp_path, monkeypatch):
    """A compiled step is estimated from its graphs: one launch overhead per
    graph launch instead of one per op."""
    import torch._dynamo
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff"))
    torch._dynamo.reset()
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)).to("neuron")
        x = torch.randn(32, 64, device="neuron")
        compiled = torch.compile(model, backend="neuron", options={"executor": "graph"})

        def step(m):
            with torch.no_grad():
                return m(x)
        eager = torch_neuron_sim.estimate(step, model, profile="trn2")
        est = torch_neuron_sim.estimate(step, compiled, profile="trn2")  # the warm-up call compiles
    finally:
        torch._dynamo.reset()
    (graph,) = [r for r in est.ops if r.kind == "graph"]
    assert graph.count == 1 and not [r for r in est.ops if r.kind == "kernel"]
    assert est.breakdown["launch"] == pytest.approx(profiler.cost_model()["launch_overhead_s"])
    assert eager.breakdown["launch"] >= 3 * est.breakdown["launch"]  # addmm, relu, addmm: a launch each
    assert est.total_seconds < eager.total_seconds
    assert est.compile_seconds == pytest.approx(profiler.cost_model()["compile_s"])
    assert "graph" in str(est) or graph.name in str(est)


def test_timeline_summary_sums_rows_and_keeps_the_longest_events_in_time_order():
    """The C++ summary (runtime/timeline_summary.cpp) the report and estimate() read."""
    torch.zeros(1, device="neuron")  # the device is up before recording
    seconds = [0.003, 0.001, 0.005, 0.002, 0.004]
    t = profiler.Timeline().start()
    for i, s in enumerate(seconds):
        profiler.record_compilation(f"g{i}", seconds=s)
    profiler.record_compilation("g0", seconds=0.0005)
    t.stop(events=False, longest=3)
    s = t.summary
    assert s["count"] == 6 and t.events == []
    rows = {r["name"]: r for r in s["rows"]}
    assert rows["g0"]["count"] == 2 and rows["g0"]["seconds"] == pytest.approx(0.0035)
    assert all(r["kind"] == "compile" and r["compile"] == pytest.approx(r["seconds"]) for r in s["rows"])
    assert s["breakdown"]["compile"] == pytest.approx(sum(seconds) + 0.0005)
    assert s["breakdown"]["compute"] == s["breakdown"]["launch"] == 0
    # The three longest (5, 4 and 3 ms), by start time: the stream runs them in issue order.
    assert [e["name"] for e in s["longest"]] == ["g0", "g2", "g4"]
    assert [e["start_ns"] for e in s["longest"]] == sorted(e["start_ns"] for e in s["longest"])
    assert s["first_start_ns"] <= s["longest"][0]["start_ns"]
    assert sum(b for _, _, b in s["busy"]) == pytest.approx(s["breakdown"]["compile"])
