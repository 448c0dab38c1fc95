"""An op a compiled graph's launch dispatches (an extern call of Inductor's
generated code, an op in a custom op's body) is part of the graph, which the
device compiler lowered: it runs on the device when the compiler's lowering
set has it (compile/graph_check.py), native in eager mode or not, and only
what has no lowering falls back. The same ops called eagerly keep the
tracked CPU fallback. Runtime assertions are in the set: the compiler makes
them checks of the compiled graph, which still raise when they fail."""
import copy

import pytest
import torch

import torch_neuron_sim
from torch_neuron_sim.compile import graphs

GRAPH = {"executor": "graph"}  # every compile phase but code generation: quick

pytestmark = pytest.mark.usefixtures("fresh_compile")  # tests/conftest.py


@torch.library.custom_op("nsim_launch_test::grad_like", mutates_args=())
def grad_like(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A kernel for every device, written as transformers' grouped-mm backward
    is: a gradient buffer like a strided weight (zeros_like: zero_ through the
    strides), written in place, and a stable sort."""
    g = torch.zeros_like(w)
    g.add_(w * 2)
    return g, torch.sort(x, dim=-1, stable=True).values


@grad_like.register_fake
def _(x, w):
    return torch.empty_like(w), torch.empty_like(x)


@torch.library.custom_op("nsim_launch_test::minus_median", mutates_args=())
def minus_median(x: torch.Tensor) -> torch.Tensor:
    return x - torch.median(x)  # aten::median: no lowering on the device


@minus_median.register_fake
def _(x):
    return torch.empty_like(x)


def _inputs():
    x = torch.randn(4, 9)
    w = torch.randn(5, 3).t()  # strided, as a transposed weight
    return x, w


def test_eager_calls_keep_the_tracked_cpu_fallback(tracked):
    x, w = _inputs()
    g, s = grad_like(x.to("neuron"), w.to("neuron"))
    torch.testing.assert_close(g.cpu(), w * 2)
    torch.testing.assert_close(s.cpu(), torch.sort(x, stable=True).values)
    assert {"aten::sort.stable", "aten::zero_", "aten::add_.Tensor"} <= set(tracked.get_fallback_ops())


def test_ops_in_a_custom_ops_body_run_on_the_device_inside_a_launch(tracked):
    x, w = _inputs()
    f = torch.compile(lambda x, w: grad_like(x + 1, w), backend="neuron", options=GRAPH)
    g, s = f(x.to("neuron"), w.to("neuron"))
    torch.testing.assert_close(g.cpu(), w * 2)
    torch.testing.assert_close(s.cpu(), torch.sort(x + 1, stable=True).values)
    assert tracked.get_fallback_ops() == []
    assert {"aten::sort.stable", "aten::zero_"} <= set(tracked.get_executed_ops())
    assert [r.executor for r in graphs.records()] == ["graph"]
    # The launch is over: the same op called eagerly falls back again.
    torch.sort(x.to("neuron"), stable=True)
    assert tracked.get_fallback_ops() == ["aten::sort.stable"]


def test_an_op_without_a_lowering_still_falls_back_inside_a_launch(tracked):
    x = torch.randn(7)
    f = torch.compile(lambda x: minus_median(x * 2), backend="neuron", options=GRAPH)
    torch.testing.assert_close(f(x.to("neuron")).cpu(), x * 2 - torch.median(x * 2))
    assert tracked.get_fallback_ops() == ["aten::median"]


def test_inductors_extern_sort_runs_on_the_device(tracked):
    # Inductor lowers a stable argsort to an extern call of aten::sort.stable,
    # which the device runs as part of the graph (eagerly only argsort.stable is native).
    x = torch.randn(3, 16)
    f = torch.compile(lambda x: torch.argsort(x * 3, dim=-1, stable=True), backend="neuron")
    torch.testing.assert_close(f(x.to("neuron")).cpu(), torch.argsort(x * 3, dim=-1, stable=True))
    assert "aten::sort.stable" in tracked.get_executed_ops()
    assert tracked.get_fallback_ops() == []
    assert [r.executor for r in graphs.records()] == ["inductor"]


@pytest.mark.parametrize("experts", ["grouped_mm", "eager"])
def test_a_mixtral_moe_block_trains_compiled_with_no_fallback_inside_its_graphs(tracked, experts):
    # transformers' MoE block compiled forward and backward: with grouped_mm
    # (the default) the router, top-k, tokens sorted by expert and the grouped-mm
    # custom ops and their backward; with the eager loop over experts, graphs
    # broken per expert that assert on data-dependent values. The whole tiny
    # Mixtral trains in test_compile_hf_models.py (deep).
    import transformers
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

    cfg = transformers.MixtralConfig(hidden_size=16, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2,
                                     experts_implementation=experts)
    torch.manual_seed(0)
    block = MixtralSparseMoeBlock(cfg)
    for p in block.parameters():
        torch.nn.init.normal_(p, std=0.2)
    x = torch.randn(2, 6, 16)

    def step(model, device):
        xi = x.to(device).detach().requires_grad_()
        y = model(xi)
        y.square().sum().backward()
        return [y.detach().cpu(), xi.grad.cpu()] + [p.grad.cpu() for p in model.parameters()]

    expected = step(copy.deepcopy(block), "cpu")
    tracked.clear_op_tracking()
    got = step(torch.compile(block.to("neuron"), backend="neuron", options=GRAPH), "neuron")
    torch.testing.assert_close(got, expected)
    assert tracked.get_fallback_ops() == []
    assert {r.executor for r in graphs.records()} == {"graph"}  # every piece compiled, none run op by op
    kinds = sorted(r.kind for r in graphs.records())
    if experts == "grouped_mm":
        assert kinds == ["backward", "forward"]  # one graph each way
    else:
        assert {"backward", "forward"} <= set(kinds)


def _checked_scale(x):
    # a data-dependent assertion, as Dynamo traces it: aten::_assert_async.msg
    torch._assert_async(x.abs().sum() > 0, "input must not be all zeros")
    return x * 2 + 1


@pytest.mark.parametrize("executor", ["inductor", "graph"])
def test_a_runtime_assertion_compiles_into_the_graph_and_still_checks(tracked, executor):
    f = torch.compile(_checked_scale, backend="neuron", options={"executor": executor})
    x = torch.randn(3, 5)
    torch.testing.assert_close(f(x.to("neuron")).cpu(), torch.compile(_checked_scale)(x))
    assert [r.executor for r in graphs.records()] == [executor]  # compiled, no graph run op by op
    assert tracked.get_fallback_ops() == []
    zeros = torch.zeros(3, 5)
    with pytest.raises(RuntimeError) as on_cpu:
        torch.compile(_checked_scale)(zeros)
    with pytest.raises(type(on_cpu.value), match="input must not be all zeros"):
        f(zeros.to("neuron"))
    torch.testing.assert_close(f(x.to("neuron")).cpu(), x * 2 + 1)  # the process stays usable


def test_every_assertion_and_shape_constraint_op_has_a_lowering():
    from torch_neuron_sim.compile import graph_check

    ops = [getattr(getattr(torch.ops.aten, n), o) for n in dir(torch.ops.aten)
           if "assert" in n or "constrain" in n or n == "_make_dep_token"
           for o in getattr(torch.ops.aten, n).overloads()]
    assert len(ops) >= 9
    assert [op.name() for op in ops if not graph_check.lowered_in_graph(op.name())] == []
