"""torch.compile on neuron: random ops compile into the graph and draw from
the device generator; torch.compile without backend= selects the neuron
backend for neuron tensors; with dynamic unset each new shape is a new
static graph."""
import logging

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

import torch_neuron_sim
from torch_neuron_sim.compile import graphs


pytestmark = pytest.mark.usefixtures("fresh_compile")  # tests/conftest.py


def _random_graph(x):
    d = torch.nn.functional.dropout(x, p=0.5, training=True)
    return d, torch.rand(4, 8, device=x.device), torch.randn(4, 8, device=x.device), torch.bernoulli(x.sigmoid())


def test_random_ops_compile_and_are_reproducible_under_manual_seed():
    f = torch.compile(_random_graph, backend="neuron")
    x = torch.randn(4, 8, device="neuron") + 3
    torch.manual_seed(7)
    first = [t.cpu() for t in f(x)]
    second = [t.cpu() for t in f(x)]
    torch.manual_seed(7)
    again = [t.cpu() for t in f(x)]
    for a, b in zip(first, again):
        assert torch.equal(a, b)
    assert not torch.equal(first[1], second[1])  # the stream moves on
    assert [r.executor for r in graphs.records()] == ["inductor"]  # compiled, not run op by op
    d = first[0]
    kept = d != 0
    torch.testing.assert_close(d[kept], (x.cpu() * 2)[kept])  # kept values scaled by 1/(1-p)
    assert 0.2 < kept.float().mean() < 0.8
    assert set(first[3].unique().tolist()) <= {0.0, 1.0}


def test_compiled_random_ops_draw_from_the_device_generator():
    f = torch.compile(lambda x: x + torch.rand(16, device=x.device), backend="neuron")
    x = torch.zeros(16, device="neuron")
    cpu_state, dev_state = torch.get_rng_state(), torch.neuron.get_rng_state()
    torch.neuron.manual_seed(3)
    a = f(x).cpu()
    assert torch.equal(torch.get_rng_state(), cpu_state)           # the CPU generator is not drawn from
    after = torch.neuron.get_rng_state()
    assert not torch.equal(after, dev_state)                        # the device generator's offset moved
    torch.neuron.manual_seed(3)
    assert torch.equal(f(x).cpu(), a)                               # the device seed alone reproduces it
    torch.neuron.manual_seed(4)
    assert not torch.equal(f(x).cpu(), a)


def test_randint_and_randperm_compile():
    f = torch.compile(lambda x: (x + torch.randint(0, 5, (8,), device=x.device), torch.randperm(6, device=x.device)),
                      backend="neuron")
    torch.manual_seed(0)
    a, p = f(torch.zeros(8, dtype=torch.int64, device="neuron"))
    assert a.device.type == "neuron" and 0 <= a.min() and a.max() < 5
    assert sorted(p.cpu().tolist()) == list(range(6))
    assert all(r.compiled for r in graphs.records())


# ---- backend auto-selection and per-shape recompiles -------------------------------

def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def test_torch_compile_without_backend_selects_neuron_for_neuron_tensors():
    m = _mlp().to("neuron")
    c = torch.compile(m)
    x = torch.randn(3, 4)
    torch.testing.assert_close(c(x.to("neuron")).cpu(), _mlp()(x))
    assert counters["neuron"]["compiled_graphs"] == 1 and len(torch.neuron.get_dynamo_metrics()) == 1
    f = torch.compile(lambda t: t * 2)  # CPU tensors: Inductor, as before
    assert f(torch.ones(3)).device.type == "cpu"
    assert counters["neuron"]["compiled_graphs"] == 1


@pytest.mark.parametrize("backend", ["neuron", None])
def test_a_smaller_last_batch_compiles_one_graph_per_shape(backend):
    m = _mlp().to("neuron")
    c = torch.compile(m, **({} if backend is None else {"backend": backend}))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for b in (8, 8, 8, 5, 8, 5):   # an epoch's last partial batch, twice
        loss = c(torch.randn(b, 4, device="neuron")).square().mean()
        loss.backward(); opt.step(); opt.zero_grad()
    kinds = sorted(r.kind for r in graphs.records())
    assert kinds == ["backward", "backward", "forward", "forward"]  # one compilation per distinct shape
    assert len(torch.neuron.get_dynamo_metrics()) == 4
    assert any("size mismatch at index 0. expected 8, actual 5" in (r.recompile_reason or "")
               for r in graphs.records())


def test_dynamic_true_and_mark_dynamic_keep_their_errors():
    f = torch.compile(lambda x: x + 1, dynamic=True)
    with pytest.raises(RuntimeError, match="Dynamic shapes detected"):
        f(torch.ones(3, device="neuron"))
    g = torch.compile(lambda x: x * 3)
    x = torch.ones(3, 4, device="neuron")
    torch._dynamo.mark_dynamic(x, 0)
    with pytest.raises(RuntimeError, match="Dynamic shapes detected"):
        g(x)


def test_past_the_recompile_limit_the_function_runs_eagerly(caplog):
    f = torch.compile(lambda x: torch.relu(x) + 1, backend="neuron", options={"executor": "graph"})

    def call(n):  # (launches of compiled graphs, device ops run eagerly) during one call
        launches = sum(r.launches for r in graphs.records())
        torch_neuron_sim.clear_op_tracking()
        x = torch.randn(n, device="neuron")
        torch.testing.assert_close(f(x).cpu(), torch.relu(x.cpu()) + 1)  # results equal, compiled or not
        return sum(r.launches for r in graphs.records()) - launches, torch_neuron_sim.get_op_counts()

    with torch._dynamo.config.patch(recompile_limit=2), caplog.at_level(logging.WARNING):
        for n in (2, 3):  # within the limit: one compiled graph per shape, launched once
            launched, _ = call(n)
            assert launched == 1
        assert not any("recompile_limit" in r.getMessage() for r in caplog.records)
        for n in (4, 5):  # past it: Dynamo compiles nothing more and the frame's new shapes run eagerly on the device
            launched, ops = call(n)
            assert launched == 0
            assert ops["aten::relu"] == {"executed": 1, "fallback": 0} and ops["aten::add.Tensor"]["executed"] == 1
        # one warning, naming the limit, when it is hit: from then on the frame only runs what it compiled
        assert sum("torch._dynamo hit config.recompile_limit (2)" in r.getMessage() for r in caplog.records) == 1
        launched, _ = call(3)  # a shape compiled before the limit still runs its graph
        assert launched == 1
    assert counters["neuron"]["compiled_graphs"] == 2 and len(torch.neuron.get_dynamo_metrics()) == 2


def test_past_the_recompile_limit_fail_on_recompile_limit_hit_raises():
    f = torch.compile(lambda x: x * 2, backend="neuron", options={"executor": "graph"})
    with torch._dynamo.config.patch(recompile_limit=1, fail_on_recompile_limit_hit=True):
        f(torch.ones(2, device="neuron"))
        with pytest.raises(torch._dynamo.exc.FailOnRecompileLimitHit, match="fail_on_recompile_limit_hit"):
            f(torch.ones(3, device="neuron"))
