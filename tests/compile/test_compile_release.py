"""torch.compile on neuron as the public release runs it: compile failures
raise by default (TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=1, the
fallback_execution option), and a graph is judged by the compiler's
lowering set after decomposition to core ATen, not by the eager table."""
import warnings

import pytest
import torch
from torch._dynamo.utils import counters

from torch_neuron_sim.compile import graphs

GRAPH = {"executor": "graph"}  # every compile phase but code generation: quick

pytestmark = pytest.mark.usefixtures("fresh_compile")  # tests/conftest.py


def _with_median(x):
    return x - torch.median(x)  # aten::median: outside core ATen, no decomposition: no lowering


def _fallback_graphs():
    return [r.name for r in graphs.records() if r.executor == "eager-fallback"]


# ---- compile failures ------------------------------------------------------------

def test_a_graph_without_a_lowering_raises_by_default_and_the_process_stays_usable():
    x = torch.rand(6, device="neuron")
    with pytest.raises(RuntimeError) as err:
        torch.compile(_with_median, backend="neuron", options=GRAPH)(x)
    msg = str(err.value)
    assert "Neuron compilation of graph model_default_" in msg and "_inference_" in msg  # the graph
    assert "ops without a Neuron lowering: aten::median." in msg                      # the ops
    assert "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0" in msg and "'fallback_execution': True" in msg  # the opt-out
    assert counters["neuron"]["compiled_graphs"] == 0
    # later graphs compile
    y = torch.compile(lambda t: torch.relu(t) * 3, backend="neuron", options=GRAPH)(x)
    torch.testing.assert_close(y.cpu(), torch.relu(x.cpu()) * 3)
    assert counters["neuron"]["compiled_graphs"] == 1


@pytest.mark.parametrize("env, option, falls_back", [
    ("0", None, True),       # the variable opts out
    (None, True, True),      # the option opts out under the default
    ("1", True, True),       # the option overrides the variable ...
    ("0", False, False),     # ... in either direction
    ("1", None, False),
])
def test_fallback_execution_option_overrides_the_variable(monkeypatch, env, option, falls_back):
    if env is not None:
        monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", env)
    options = dict(GRAPH, **({} if option is None else {"fallback_execution": option}))
    f = torch.compile(_with_median, backend="neuron", options=options)
    x = torch.rand(6, device="neuron")
    if falls_back:
        torch.testing.assert_close(f(x).cpu(), _with_median(x.cpu()))
        assert len(_fallback_graphs()) == 1
    else:
        with pytest.raises(RuntimeError, match="ops without a Neuron lowering: aten::median"):
            f(x)


def test_fallback_execution_must_be_a_bool():
    # The backend raises TypeError at the first call (when Dynamo hands it the
    # graph); Dynamo reports a backend's exception as BackendCompilerFailed,
    # holding the TypeError as its inner_exception.
    f = torch.compile(lambda x: x + 1, backend="neuron", options={"fallback_execution": "yes"})
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as failed:
        f(torch.ones(2, device="neuron"))
    assert type(failed.value.inner_exception) is TypeError
    assert str(failed.value.inner_exception) == ("torch.compile(backend='neuron'): option 'fallback_execution' must be "
                                                 "True or False, got 'yes' (str)")
    assert "TypeError: torch.compile(backend='neuron'): option 'fallback_execution'" in str(failed.value)
    g = torch.compile(lambda x: x + 1, backend="neuron", options={**GRAPH, "fallback_execution": False})
    assert g(torch.ones(2, device="neuron")).cpu().tolist() == [2.0, 2.0]  # the process stays usable


def test_an_unknown_option_warns_naming_it():
    f = torch.compile(lambda x: x + 1, backend="neuron", options={**GRAPH, "fallback_executoin": True})
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert f(torch.ones(2, device="neuron")).cpu().tolist() == [2.0, 2.0]
    assert any("unknown option(s) ['fallback_executoin']" in str(x.message) for x in w)


# ---- the compiler's lowering set ----------------------------------------------------

def _overloads(x, y):
    a = torch.div(x, 2.0)                       # aten::div.Scalar
    b = x.mul(y).add_(1.5)                      # aten::mul.Tensor, in-place add_
    out = torch.empty_like(x)
    torch.sub(a, b, out=out)                    # out=
    c = out.t().contiguous().view(-1)[::2]      # views and metadata
    d = torch.nn.functional.hardswish(c)        # decomposes into lowerable ops
    return d.sum() + torch.addcmul(x, x, y, value=0.5).mean()


def test_every_overload_view_and_decomposable_op_compiles():
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    f = torch.compile(_overloads, backend="neuron", options=GRAPH)
    torch.testing.assert_close(f(x.to("neuron"), y.to("neuron")).cpu(), _overloads(x, y))
    assert _fallback_graphs() == [] and counters["neuron"]["compiled_graphs"] == 1


def test_a_scalar_overload_in_a_backward_compiles():
    w = torch.randn(8, device="neuron", requires_grad=True)
    f = torch.compile(lambda x: (torch.div(x * w, 3.0) / 7).pow(2).sum(), backend="neuron", options=GRAPH)
    f(torch.randn(8, device="neuron")).backward()
    kinds = sorted(r.kind for r in graphs.records() if r.compiled)
    assert kinds == ["backward", "forward"] and _fallback_graphs() == []


def test_sparse_ops_have_no_lowering():
    from torch_neuron_sim.compile import graph_check
    gm = torch.fx.symbolic_trace(lambda x: x)
    node = next(n for n in gm.graph.nodes if n.op == "placeholder")
    with gm.graph.inserting_after(node):
        gm.graph.call_function(torch.ops.aten._to_sparse.default, (node,))
    assert graph_check.ops_without_lowering(gm) == ["aten::_to_sparse"]


# ---- CPU inputs --------------------------------------------------------------------

def test_a_cpu_model_trains_through_the_neuron_backend_with_gradients_on_the_cpu():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    ref = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    ref.load_state_dict(m.state_dict())
    x = torch.randn(6, 4)
    out = torch.compile(m, backend="neuron", options=GRAPH)(x)
    assert out.device.type == "neuron"
    out.sum().backward()
    ref(x).sum().backward()
    for p, q in zip(m.parameters(), ref.parameters()):
        assert p.grad.device.type == "cpu"
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-5)


# ---- artifacts -----------------------------------------------------------------------

def test_artifacts_are_kept_only_on_request(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DEBUG_DIR", str(tmp_path / "dbg"))
    f = torch.compile(lambda x: torch.relu(x) + 1, backend="neuron", options={**GRAPH, "model_name": "M"})
    f(torch.randn(4, device="neuron"))
    assert not (tmp_path / "dbg").exists()  # nothing by default
    monkeypatch.setenv("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "1")
    torch._dynamo.reset()
    f(torch.randn(4, device="neuron"))
    fx = list((tmp_path / "dbg" / "fx_graphs" / "proc_0").iterdir())
    neff = list((tmp_path / "dbg" / "neff" / "proc_0").iterdir())
    assert len(fx) == 1 and len(neff) == 1
    assert fx[0].name.startswith("M_") and fx[0].suffix == ".txt" and neff[0].suffix == ".py"
    assert "torch.ops.aten.relu" in fx[0].read_text() and "def forward" in neff[0].read_text()
