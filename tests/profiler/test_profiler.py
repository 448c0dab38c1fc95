"""Device events in torch.profiler (docs/profiling.md): one per native op,
copy, fallback round trip, compilation and collective, on a row per device
and stream, linked to the CPU op that issued it."""
import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import torch_neuron_sim
from torch_neuron_sim import profiler

BOTH = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


pytestmark = pytest.mark.usefixtures("quiet_fallbacks")  # conftest.py


def device_events(trace):
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy")]


def export(p, tmp_path):
    path = tmp_path / "trace.json"
    p.export_chrome_trace(str(path))
    return json.loads(path.read_text())


def test_device_events_arrive_with_durations_from_the_model(tmp_path):
    a = torch.randn(128, 256, device="neuron")
    b = torch.randn(256, 64, device="neuron")
    with profile(activities=BOTH) as p:
        c = a @ b
    trace = export(p, tmp_path)
    mm = [e for e in device_events(trace) if e["name"] == "aten::mm"]
    assert len(mm) == 1, "no neuron device rows: the Kineto profiler is not registered (USE_KINETO?)"
    expected = profiler.op_cost("aten::mm", [((128, 256), "float32"), ((256, 64), "float32")],
                                [((128, 64), "float32")], profile=profiler.cost_model()["profile"])
    assert mm[0]["dur"] == pytest.approx(expected["seconds"] * 1e6, abs=0.002)
    assert mm[0]["args"]["flops"] == 2 * 128 * 256 * 64
    assert mm[0]["pid"] == 0 and mm[0]["tid"] == 0  # device 0, stream 0
    assert c.device.type == "neuron"


def test_key_averages_show_device_time_per_op():
    a = torch.randn(64, 64, device="neuron")
    with profile(activities=BOTH) as p:
        for _ in range(3):
            a = torch.relu(a @ a)
    rows = {e.key: e for e in p.key_averages()}
    assert rows["aten::mm"].count == 3
    assert rows["aten::mm"].device_time_total > 0
    assert rows["aten::relu"].device_time_total > 0


def test_cpu_only_profile_records_no_device_rows(tmp_path):
    a = torch.randn(8, 8, device="neuron")
    with profile(activities=[ProfilerActivity.CPU]) as p:
        a + a
    assert device_events(export(p, tmp_path)) == []


def test_each_kind_arrives_linked_to_its_cpu_op(tmp_path):
    x_cpu = torch.randn(32, 32)
    torch_neuron_sim._C._clear_compile_cache()  # so the ops below compile (a compile event each)
    with profile(activities=BOTH) as p:
        x = x_cpu.to("neuron")                               # H2D
        y = x.clone()                                        # D2D-free native op
        z = torch.trace(y)                                   # not native: fallback round trip
        v = z.item()                                         # D2H (.item())
        w = (x * 3.5).cpu()                                  # D2H
        w2 = torch.sin(x[:, :7].contiguous() * 1.25)         # new signatures: compilations
        profiler.record_collective("all_reduce", 4 * 32 * 32, 4)
    trace = export(p, tmp_path)
    events = device_events(trace)
    kinds = {e["args"]["kind"] for e in events}
    assert {"kernel", "copy_h2d", "copy_d2h", "fallback", "compile", "collective"} <= kinds
    fb = [e for e in events if e["args"]["kind"] == "fallback"]
    assert fb[0]["name"] == "aten::trace"
    # The round trip's copies are marked as part of it.
    assert any(e["args"].get("cpu fallback") for e in events if e["args"]["kind"] == "copy_d2h")
    # Every device event names the CPU op that issued it (External id = its correlation id),
    # and a flow arrow runs from the launch on the host thread to it.
    cpu_ids = {e["args"]["External id"]: e["name"] for e in trace["traceEvents"]
               if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    for e in events:
        if e["args"]["kind"] == "collective":
            continue  # recorded from Python, outside any op
        assert e["args"].get("External id") in cpu_ids, e
    by_name = {e["name"]: cpu_ids[e["args"]["External id"]] for e in events if e["args"]["kind"] == "kernel"}
    assert by_name["aten::mul.Tensor"] == "aten::mul"  # device events carry the overload
    flows = [e for e in trace["traceEvents"] if e.get("ph") in ("s", "f") and e.get("cat") == "ac2g"]
    assert len([f for f in flows if f["ph"] == "f"]) == len(events)
    assert v == pytest.approx(float(torch.trace(x_cpu.clone())), rel=1e-5)
    assert w.shape == (32, 32) and w2.device.type == "neuron"


def test_rows_per_device_and_stream(tmp_path, nrt_streams):  # a second stream: NEURON_RT_ENABLE_HOST_CC=1
    if torch.neuron.device_count() < 2:
        pytest.skip("needs two devices")
    s = torch.neuron.Stream()
    a0 = torch.ones(16, device="neuron:0")
    a1 = torch.ones(16, device="neuron:1")
    with profile(activities=BOTH) as p:
        a0 + a0
        a1 * a1
        with torch.neuron.stream(s):
            a0 - a0
    events = {e["name"]: e for e in device_events(export(p, tmp_path))}
    assert (events["aten::add.Tensor"]["pid"], events["aten::add.Tensor"]["tid"]) == (0, 0)
    assert events["aten::mul.Tensor"]["pid"] == 1
    assert (events["aten::sub.Tensor"]["pid"], events["aten::sub.Tensor"]["tid"]) == (0, s.stream_id)


def test_device_to_device_copy(tmp_path):
    if torch.neuron.device_count() < 2:
        pytest.skip("needs two devices")
    a0 = torch.ones(4096, device="neuron:0")
    with profile(activities=BOTH) as p:
        a1 = a0.to("neuron:1")
    (copy,) = [e for e in device_events(export(p, tmp_path)) if e["args"]["kind"] == "copy_d2d"]
    assert copy["name"] == "neuron memcpy DtoD" and copy["cat"] == "gpu_memcpy"
    assert copy["args"]["bytes"] == 4096 * 4 and copy["pid"] == 0
    m = profiler.cost_model()
    assert copy["args"]["modelled us"] == pytest.approx((m["launch_overhead_s"] + 2 * 4096 * 4 / m["hbm_bytes_per_s"]) * 1e6)
    assert a1.device == torch.device("neuron:1")


def test_device_waits_for_host_and_stream():
    with profiler.timeline() as t:
        a = torch.randn(256, 256, device="neuron")
        b = a @ a
        c = b + 1
    ev = [e for e in t.events if e["kind"] == "kernel"]
    for prev, cur in zip(ev, ev[1:]):
        assert cur["start_ns"] >= max(cur["issue_ns"], prev["end_ns"])
        assert cur["end_ns"] - cur["start_ns"] == round(cur["seconds"] * 1e9)


def test_profiler_off_records_nothing():
    n0 = profiler._C._prof_event_count()
    a = torch.randn(8, device="neuron")
    a + a
    assert profiler._C._prof_event_count() == n0


def test_failing_op_leaves_profiler_usable():
    a = torch.randn(4, 4, device="neuron")
    with profile(activities=BOTH) as p:
        with pytest.raises(RuntimeError):
            a @ torch.randn(5, 5, device="neuron")
        a @ a
    assert {e.key for e in p.key_averages()} >= {"aten::mm"}


# ---- torch.compile: a compiled graph is one launch, its compilation one event ------------------

@pytest.fixture
def fresh_compile(tmp_path, monkeypatch):
    import torch._dynamo
    from torch_neuron_sim.compile import compiler
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff"))
    torch._dynamo.reset()
    compiler.clear_memory_cache()
    yield
    torch._dynamo.reset()


def _mlp(d_in=64, hidden=128, d_out=16):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(d_in, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, d_out))


def test_compiled_graph_launches_and_compilation_on_the_timeline(tmp_path, fresh_compile):
    model = _mlp().to("neuron")
    run = torch.compile(model, backend="neuron", options={"executor": "graph"})
    x = torch.randn(32, 64, device="neuron")
    with torch.no_grad():
        with profile(activities=BOTH) as p:
            y1 = run(x)  # compiles, then launches
            y2 = run(x)  # launches from the cache
        expected = model(x)
    trace = export(p, tmp_path)
    events = device_events(trace)
    graphs = [e for e in events if e["args"]["kind"] == "graph"]
    compiles = [e for e in events if e["args"]["kind"] == "compile"]
    assert len(graphs) == 2 and len(compiles) == 1
    assert compiles[0]["name"] == "compile " + graphs[0]["name"] and "inference" in graphs[0]["name"]
    # (its drawn duration is clamped to the capture window; the model's is in its arguments)
    assert compiles[0]["args"]["modelled us"] == pytest.approx(profiler.cost_model()["compile_s"] * 1e6)
    # The graph's ops ran inside its launch: no device events of their own.
    assert [e["name"] for e in events if e["args"]["kind"] == "kernel"] == []
    # Its work is its kernels': two matmuls (with their bias adds) and the ReLU.
    matmuls = 2 * 32 * 64 * 128 + 2 * 32 * 128 * 16
    assert matmuls <= graphs[0]["args"]["flops"] <= matmuls + 3 * 32 * 128
    # One launch overhead for the whole graph, less than the eager ops cost.
    with torch.no_grad(), profiler.timeline() as eager:
        model(x)
    eager_s = sum(e["seconds"] for e in eager.events if e["kind"] == "kernel")
    assert graphs[1]["dur"] < eager_s * 1e6
    assert graphs[1]["args"]["modelled us"] >= profiler.cost_model()["launch_overhead_s"] * 1e6
    # Linked to the CPU op that launched it, by correlation id and flow arrow.
    cpu_ids = {e["args"]["External id"] for e in trace["traceEvents"]
               if e.get("cat") in ("cpu_op", "user_annotation") and "External id" in e.get("args", {})}
    assert all(g["args"].get("External id") in cpu_ids for g in graphs)
    torch.testing.assert_close(y1, expected)
    torch.testing.assert_close(y2, expected)
    assert any(r.device_time_total > 0 for r in p.key_averages() if "Compiled" in r.key or "compiled" in r.key)


def test_inductor_graph_is_one_launch(tmp_path, fresh_compile):
    """Inductor's generated code calls the device's matmul itself: still one event, the graph's."""
    f = torch.compile(lambda a, b: torch.relu(a @ b) + 1.0, backend="neuron")
    a, b = torch.randn(64, 32, device="neuron"), torch.randn(32, 48, device="neuron")
    f(a, b)  # compiles outside the profile
    with profile(activities=BOTH) as p:
        out = f(a, b)
    events = device_events(export(p, tmp_path))
    assert [e["args"]["kind"] for e in events] == ["graph"]
    assert events[0]["args"]["flops"] >= 2 * 64 * 32 * 48
    torch.testing.assert_close(out.cpu(), torch.relu(a.cpu() @ b.cpu()) + 1.0)
