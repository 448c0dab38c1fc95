"""torch.compile(backend="neuron"): the real backend's compile semantics.

Inductor cold compiles cost seconds, so only the training test and a few
small graphs use the Inductor executor; semantics tests use the op-by-op
executor (options={"executor": "graph"}), which shares every compile phase
but code generation."""
import copy
import os
import re
import warnings

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import compilation_time_metrics, counters

import torch_neuron_sim
from torch_neuron_sim import metrics
from torch_neuron_sim.compile import compiler, graphs, neff_cache

from conftest import run_python

GRAPH = {"executor": "graph"}


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    """Each test starts with no Dynamo cache, no graph metrics and its own
    NEFF cache directory."""
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff"))
    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    compiler.clear_memory_cache()
    graphs.clear()
    metrics.set_enabled(True)
    metrics.clear_all()
    yield
    metrics.set_enabled(False)
    metrics.clear_all()
    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    graphs.clear()


def compiled_graphs() -> int:
    return counters["neuron"]["compiled_graphs"]


# ---- registration ------------------------------------------------------------

def test_backend_is_registered_once_by_entry_point():
    assert "neuron" in torch._dynamo.list_backends()
    from torch._dynamo.backends.registry import lookup_backend, register_backend
    from torch_neuron_sim.compile.backend import neuron_backend
    assert lookup_backend("neuron") is neuron_backend
    with pytest.raises(AssertionError, match="duplicate name: neuron"):
        register_backend(neuron_backend, name="neuron")


def test_other_modes_warn_and_are_ignored(monkeypatch):
    monkeypatch.setenv("NEURON_SIM_COMPILE_EXECUTOR", "graph")  # torch.compile takes mode or options, not both
    f = torch.compile(lambda x: x * 2, backend="neuron", mode="max-autotune")
    x = torch.randn(4, device="neuron")
    with pytest.warns(UserWarning, match="mode 'max-autotune' is not supported and is ignored"):
        y = f(x)
    torch.testing.assert_close(y.cpu(), x.cpu() * 2)
    assert compiled_graphs() == 1


# ---- training: compiled equals eager equals CPU ------------------------------

def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                               torch.nn.Linear(32, 4))


def _train(model, device, steps=5, compile_options=None):
    model = model.to(device)
    run = torch.compile(model, backend="neuron", options=compile_options) if compile_options is not None else model
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x = torch.randn(8, 16, generator=g).to(device)
        y = torch.randint(0, 4, (8,), generator=g).to(device)
        loss = torch.nn.functional.cross_entropy(run(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


def test_training_five_steps_compiled_equals_eager_equals_cpu():
    cpu_losses, cpu_params = _train(_mlp(), "cpu")
    eager_losses, eager_params = _train(_mlp(), "neuron")
    torch_neuron_sim.clear_op_tracking()
    comp_losses, comp_params = _train(_mlp(), "neuron", compile_options={})
    for a, b, c in zip(cpu_params, eager_params, comp_params):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(c, a, rtol=1e-4, atol=1e-5)
    assert comp_losses == pytest.approx(cpu_losses, rel=1e-4)
    # One forward and one backward graph, each compiled once, launched per step.
    assert compiled_graphs() == 2
    recs = graphs.records()
    assert [(r.kind, r.executor, r.launches) for r in recs] == [("forward", "inductor", 5), ("backward", "inductor", 5)]
    assert [r.cache for r in recs] == ["compiled", "compiled"]
    assert metrics.get_counter_value("CompilationCache.PersistentMisses") == 2
    assert metrics.get_counter_value("CompiledGraph.Launches") == 10
    assert metrics.get_metric_data("CompilationCache.NeffSize").total_samples == 2
    assert torch_neuron_sim.get_fallback_ops() == []
    # Inductor lowers linear's backward (a device op AOTAutograd keeps whole)
    # to its matmuls and fused sums, not one opaque call per layer.
    ops = torch_neuron_sim.get_executed_ops()
    assert "aten::mm.out" in ops and not [op for op in ops if op.startswith("aten::linear_backward")]


def test_graph_executor_runs_op_by_op_with_tracking():
    cpu_losses, _ = _train(_mlp(), "cpu", steps=2)
    torch_neuron_sim.clear_op_tracking()
    torch_neuron_sim.compile_cache.clear()
    losses, _ = _train(_mlp(), "neuron", steps=2, compile_options=GRAPH)
    assert losses == pytest.approx(cpu_losses, rel=1e-4)
    ops = torch_neuron_sim.get_executed_ops()
    # linear is a device kernel, so AOTAutograd keeps it whole, forward and backward
    assert {"aten::linear", "aten::linear_backward", "aten::native_layer_norm_backward"} <= set(ops)
    assert [r.executor for r in graphs.records()] == ["graph", "graph"]
    # The graph is one compiled unit: its ops note no eager compilations.
    assert "aten::native_layer_norm_backward" not in torch_neuron_sim.compile_cache.op_signatures()


def test_attention_block_compiles_through_inductor_forward_and_backward():
    # A fused qkv projection split in three, causal attention: the backward
    # graph concatenates the three gradients (masked loads in Inductor's C++
    # kernel, which took Triton's code path for an unknown device).
    torch.manual_seed(0)
    x = torch.randn(2, 8, 64)
    w = torch.randn(192, 64, requires_grad=True)

    def attn(x, w):
        q, k, v = (t.reshape(2, 8, 4, 16).transpose(1, 2) for t in (x @ w.t()).chunk(3, dim=-1))
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return out.transpose(1, 2).reshape(2, 8, 64)

    expect = attn(x, w)
    expect.sum().backward()
    wn = w.detach().to("neuron").requires_grad_()
    out = torch.compile(attn, backend="neuron")(x.to("neuron"), wn)
    out.sum().backward()
    torch.testing.assert_close(out.detach().cpu(), expect.detach(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(wn.grad.cpu(), w.grad, rtol=1e-4, atol=1e-3)
    assert [(r.kind, r.executor, r.fallback_ops) for r in graphs.records()] == [
        ("forward", "inductor", []), ("backward", "inductor", [])]


# ---- static shapes -------------------------------------------------------------

def test_each_new_shape_compiles_a_new_graph():
    f = torch.compile(lambda x: torch.relu(x) * 2, backend="neuron", dynamic=False, options=GRAPH)
    for n in (2, 3, 2, 4, 3):
        x = torch.randn(n, 5, device="neuron")
        torch.testing.assert_close(f(x).cpu(), torch.relu(x.cpu()) * 2)
    assert compiled_graphs() == 3
    assert len(torch.neuron.get_dynamo_metrics()) == 3
    reasons = [r.recompile_reason for r in graphs.records()]
    assert reasons[0] is None and all("size mismatch" in r for r in reasons[1:])


def _dynamic_error(**compile_kwargs):
    return pytest.raises(RuntimeError, match=r"Dynamic shapes detected in the model, but torch-neuronx requires "
                                             r"static shapes\. Found 1 dynamic dimension\(s\): \[s\d+\]")


def test_dynamic_true_raises():
    f = torch.compile(lambda x: x + 1, backend="neuron", dynamic=True, options=GRAPH)
    with _dynamic_error():
        f(torch.randn(3, device="neuron"))


def test_mark_dynamic_raises():
    f = torch.compile(lambda x: x + 1, backend="neuron", options=GRAPH)
    x = torch.randn(3, 4, device="neuron")
    torch._dynamo.mark_dynamic(x, 0)
    with _dynamic_error():
        f(x)


def test_a_second_shape_with_dynamic_unset_is_a_new_static_graph():
    f = torch.compile(lambda x: x + 1, backend="neuron", options=GRAPH)
    f(torch.randn(3, device="neuron"))
    assert f(torch.randn(5, device="neuron")).shape == (5,)  # no automatic dynamic for the neuron backend
    assert compiled_graphs() == 2


# ---- graph-level fallback ------------------------------------------------------

def _with_median(x):
    return x - torch.median(x)  # aten::median: outside core ATen, no decomposition, no Neuron lowering


def test_graph_with_non_native_op_runs_eagerly_with_a_warning(caplog, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")  # the opt-out of the default error
    torch_neuron_sim.clear_op_tracking()
    f = torch.compile(_with_median, backend="neuron")
    x = torch.rand(6, device="neuron") + 0.5
    with caplog.at_level("WARNING", logger="torch_neuron_sim"):
        y = f(x)
    torch.testing.assert_close(y.cpu(), _with_median(x.cpu()))
    assert any("failed to compile" in r.message and "aten::median" in r.message for r in caplog.records)
    assert any(op.startswith("aten::median") for op in torch_neuron_sim.get_fallback_ops())
    assert compiled_graphs() == 0
    assert [(r.executor, r.fallback_ops) for r in graphs.records()] == [("eager-fallback", ["aten::median"])]


def test_disable_fallback_execution_makes_it_an_error(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "1")
    f = torch.compile(_with_median, backend="neuron")
    with pytest.raises(RuntimeError, match="ops without a Neuron lowering: aten::median"):
        f(torch.rand(6, device="neuron"))
    monkeypatch.delenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION")  # the default is the same error
    torch._dynamo.reset()
    with pytest.raises(RuntimeError, match=r"(?s)graph model_default_\d+_inference_\d+ failed.*aten::median.*"
                                           r"TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0.*fallback_execution"):
        f(torch.rand(6, device="neuron"))


def test_report_lists_graphs_recompiles_and_graph_breaks():
    def fn(x):
        x = x * 2
        torch._dynamo.graph_break()
        return x + 1
    f = torch.compile(fn, backend="neuron", dynamic=False, options=GRAPH)
    with torch_neuron_sim.report() as r:
        f(torch.randn(4, device="neuron"))
        f(torch.randn(6, device="neuron"))
    tc = r.data["torch_compile"]
    assert tc["compiled_graphs"] == 4 and tc["recompiles"] == 2
    assert all(g["node_count"] >= 1 and g["launches"] == 1 for g in tc["graphs"])
    assert any("graph_break" in b["reason"] or "graph break" in b["reason"].lower() for b in tc["graph_breaks"])
    assert "torch.compile(backend='neuron'): 4 graph(s) compiled" in r.text()


# ---- persistent NEFF cache -----------------------------------------------------

_CACHE_SCRIPT = """
import torch, torch_neuron_sim
from torch_neuron_sim import metrics
metrics.set_enabled(True)
f = torch.compile(lambda x: torch.sin(x) * 3, backend="neuron", options={"executor": "graph"})
print(f(torch.ones(4, device="neuron")).cpu().tolist())
print({n: metrics.get_counter_value(n) for n in ("CompilationCache.PersistentHits",
       "CompilationCache.PersistentMisses")}, [r.cache for r in torch_neuron_sim.compile.records()])
"""


def test_persistent_cache_hit_in_a_second_process(tmp_path):
    env = {"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "shared")}
    first = run_python(_CACHE_SCRIPT, env)
    assert first.returncode == 0, first.stderr
    assert "{'CompilationCache.PersistentHits': None, 'CompilationCache.PersistentMisses': 1} ['compiled']" \
        in first.stdout
    second = run_python(_CACHE_SCRIPT, env)
    assert second.returncode == 0, second.stderr
    assert "{'CompilationCache.PersistentHits': 1, 'CompilationCache.PersistentMisses': None} ['persistent']" \
        in second.stdout
    assert first.stdout.splitlines()[0] == second.stdout.splitlines()[0]


def test_corrupt_cache_entry_is_reported_and_recompiled(caplog):
    def run():
        torch._dynamo.reset()
        compiler.clear_memory_cache()
        f = torch.compile(lambda x: x * 5, backend="neuron", options=GRAPH)
        return f(torch.ones(3, device="neuron")).cpu()
    run()
    (entry,) = list(neff_cache.cache_dir().rglob("*.neff"))
    entry.write_bytes(entry.read_bytes()[:-7])  # truncated
    with caplog.at_level("WARNING", logger="torch_neuron_sim"):
        assert run().tolist() == [5.0] * 3
    assert any("corrupt entry" in r.message and "truncated" in r.message for r in caplog.records)
    assert neff_cache.load(entry.stem) is not None  # rewritten whole
    run()
    assert [r.cache for r in graphs.records()] == ["compiled", "compiled", "persistent"]


def test_disable_neff_cache_writes_nothing(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_NEFF_CACHE", "1")
    torch.compile(lambda x: x - 1, backend="neuron", options=GRAPH)(torch.ones(2, device="neuron"))
    assert not neff_cache.cache_dir().exists()
    assert [r.cache for r in graphs.records()] == ["compiled"]
    assert metrics.get_counter_value("CompilationCache.PersistentMisses") is None


# ---- metrics -------------------------------------------------------------------

def test_dynamo_metrics_fields_and_compile_phases():
    compilation_time_metrics.clear()
    with torch.inference_mode():
        f = torch.compile(torch.nn.Linear(10, 5).to("neuron"), backend="neuron",
                          options={"model_name": "LlamaForCausalLM", "executor": "graph"})
        f(torch.randn(2, 10, device="neuron"))
    (m,) = torch.neuron.get_dynamo_metrics()
    assert re.fullmatch(r"LlamaForCausalLM_\d+_inference_\d+", m.graph_name)
    assert m.model_name == "LlamaForCausalLM" and not m.has_collectives and m.graph_node_count >= 1
    assert m.torch_neuronx_lower_us > 0 and m.torch_neuronx_compile_us > 0 and m.graph_id
    for phase in ("torch_neuronx_fx_passes", "torch_neuronx_lower", "torch_neuronx_compile"):
        assert len(compilation_time_metrics[phase]) == 1
    assert "torch_neuronx_compile" in torch._dynamo.utils.compile_times(repr="str")
    assert counters["neuron"]["graphs_with_collectives"] == 0
    torch.neuron.reset_dynamo_metrics()
    assert torch.neuron.get_dynamo_metrics() == [] and compiled_graphs() == 0
    text = metrics.report()
    assert "Counter: CompilationCache.TotalCompilations" in text and "Metric: CompilationCache.NeffSize" in text


def test_simulated_compile_latency_applies_per_graph():
    import time
    torch_neuron_sim.compile_cache.set_compile_latency_ms(300)
    try:
        f = torch.compile(lambda x: x.exp() + x.sin() * x.cos(), backend="neuron", options=GRAPH)
        x = torch.randn(8, device="neuron")
        t = time.perf_counter()
        f(x)
        first = time.perf_counter() - t
        t = time.perf_counter()
        f(x)
        again = time.perf_counter() - t
    finally:
        torch_neuron_sim.compile_cache.set_compile_latency_ms(0)
    assert first >= 0.3 > again  # one graph: one latency, however many ops it holds
    data = metrics.get_metric_data("CompilationCache.CompilationTime")
    assert data.total_samples == 1 and data.accumulator >= 3e8


# ---- dtypes and devices --------------------------------------------------------

def test_float64_graph_computes_in_float32():
    f = torch.compile(lambda x, y: x @ y + 1e-9, backend="neuron", options=GRAPH)
    x, y = torch.randn(16, 16, dtype=torch.float64), torch.randn(16, 16, dtype=torch.float64)
    out = f(x.to("neuron"), y.to("neuron"))
    assert out.dtype == torch.float64 and out.device.type == "neuron"
    expect32 = (x.float() @ y.float() + 1e-9).double()
    torch.testing.assert_close(out.cpu(), expect32, rtol=1e-6, atol=1e-6)
    assert not torch.equal(out.cpu(), x @ y + 1e-9)  # not float64 precision


def test_cpu_inputs_are_copied_in(monkeypatch):
    torch_neuron_sim.clear_op_tracking()
    f = torch.compile(lambda x: torch.tanh(x) * 2, backend="neuron", options=GRAPH)
    x = torch.randn(5)
    y = f(x)
    assert y.device.type == "neuron"  # autocopy: the outputs are device tensors
    torch.testing.assert_close(y.cpu(), torch.tanh(x) * 2)
    assert "aten::tanh" in torch_neuron_sim.get_executed_ops()  # it ran on the device
    monkeypatch.setenv("TORCH_NEURONX_RETAIN_DEVICE_MODE", "1")  # outputs take the inputs' placement
    assert f(x).device.type == "cpu"
    monkeypatch.setenv("TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY", "1")
    with pytest.raises(RuntimeError, match="Input tensor at index 0 is on cpu device"):
        f(x)


def test_graph_on_neuron_1_stays_on_neuron_1():
    f = torch.compile(lambda x, y: torch.relu(x @ y) + x, backend="neuron")
    x, y = torch.randn(8, 8), torch.randn(8, 8)
    xn, yn = x.to("neuron:1"), y.to("neuron:1")
    f(xn, yn)
    torch_neuron_sim.clear_op_tracking()
    before = torch.neuron.memory_stats(1)["active_bytes.all.current"]
    out = f(xn, yn)
    assert out.device == torch.device("neuron:1")
    torch.testing.assert_close(out.cpu(), torch.relu(x @ y) + x)
    assert torch.neuron.current_device() == 0
    # The graph's buffers are allocated by the launch, in neuron:1's memory,
    # not as eager allocations of their own.
    assert torch.neuron.memory_stats(1)["active_bytes.all.current"] - before == out.untyped_storage().nbytes()
    ops = torch_neuron_sim.get_executed_ops()
    assert "aten::mm.out" in ops and "aten::empty_strided" not in ops


def test_the_generated_codes_allocation_entry_point_rejects_bad_arguments():
    from torch_neuron_sim import _C
    with pytest.raises(TypeError, match="size and stride are tuples of ints of one length"):
        _C._empty_strided_neuron([4], (1,), torch.float32)
    with pytest.raises(TypeError, match="dtype a torch.dtype"):
        _C._empty_strided_neuron((4, 2), (2, 1), "float32")
    buf = _C._empty_strided_neuron((4, 2), (1, 4), torch.float16)  # the process stays usable
    assert (buf.device, buf.stride(), buf.dtype) == (torch.device("neuron:0"), (1, 4), torch.float16)


def test_a_launch_on_another_device_leaves_the_process_default_alone():
    # The launch guards the device of its own thread, as torch.cuda.device does:
    # a thread that never chose a device sees the process default, during the
    # launch too (a probe op in the graph starts such a thread).
    import threading

    seen = []

    @torch.library.custom_op("nsimtest::default_device_probe", mutates_args=())
    def probe(x: torch.Tensor) -> torch.Tensor:
        t = threading.Thread(target=lambda: seen.append(torch.neuron.current_device()))
        t.start()
        t.join()
        return x.clone()

    probe.register_fake(lambda x: torch.empty_like(x))
    f = torch.compile(lambda x: probe(x * 3), backend="neuron", options=GRAPH)
    x = torch.randn(4).to("neuron:1")
    torch.testing.assert_close(f(x).cpu(), x.cpu() * 3)
    assert seen == [0] and torch.neuron.current_device() == 0


# ---- custom ops ----------------------------------------------------------------

@torch.library.custom_op("neuron_sim_test::scaled_tanh", mutates_args=(), device_types="neuron")
def scaled_tanh(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.tanh(x) * scale


@scaled_tanh.register_fake
def _(x, scale):
    return torch.empty_like(x)


def _scaled_tanh_backward(ctx, grad):
    (y,) = ctx.saved_tensors
    return grad * (ctx.scale - y * y / ctx.scale), None


def _scaled_tanh_setup(ctx, inputs, output):
    ctx.scale = inputs[1]
    ctx.save_for_backward(output)


scaled_tanh.register_autograd(_scaled_tanh_backward, setup_context=_scaled_tanh_setup)


def test_custom_op_eager_and_compiled():
    x_cpu = torch.randn(6)
    expect = torch.tanh(x_cpu) * 3
    grad_expect = 3 * (1 - torch.tanh(x_cpu) ** 2)
    for run in (lambda t: scaled_tanh(t, 3.0),
                torch.compile(lambda t: scaled_tanh(t, 3.0) + 0, backend="neuron")):
        x = x_cpu.to("neuron").requires_grad_()
        y = run(x)
        y.sum().backward()
        torch.testing.assert_close(y.detach().cpu(), expect)
        torch.testing.assert_close(x.grad.cpu(), grad_expect)
    assert compiled_graphs() == 2
    assert [r.executor for r in graphs.records()] == ["inductor", "inductor"]


def test_a_tensor_saved_twice_for_backward_gives_every_gradient_like_the_cpu():
    # relu's result is also the next linear's input (the device keeps linear
    # whole), so the backward graph receives it twice: reusing one in place for
    # relu's gradient must not change what the weight gradient reads.
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8))
    dev = copy.deepcopy(cpu).to("neuron")
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    torch.nn.functional.mse_loss(cpu(x), y).backward()
    torch.nn.functional.mse_loss(torch.compile(dev, backend="neuron")(x.to("neuron")), y.to("neuron")).backward()
    for (name, a), b in zip(cpu.named_parameters(), dev.parameters()):
        torch.testing.assert_close(b.grad.cpu(), a.grad, msg=name)
