"""The testing kit itself: the strategies draw what they promise, mirror()
keeps layouts, assert_parity catches each kind of mismatch and knows the
dtype rules, and the op-tracking assertions mean what torch_neuronx's do."""

import pytest
import torch
from hypothesis import find, given, strategies as st

import torch_neuron_sim
from torch_neuron_sim.testing import (
    FallbackError, assert_no_fallback, assert_op_did_not_run_on_neuron, assert_op_does_not_run,
    assert_op_falls_back_on_cpu, assert_op_runs_on_neuron, assert_parity, dtype_rule_active, execution_path, mirror,
    tolerance, track_neuron_ops,
)
from torch_neuron_sim.testing import strategies as nst

FALLBACK_OP = "aten::cumprod"  # not in the default native-op table


# ---- strategies -----------------------------------------------------------------
def test_shapes_include_scalars_and_empty():
    assert find(nst.shapes(), lambda s: len(s) == 0) == ()
    assert 0 in find(nst.shapes(), lambda s: 0 in s)


@given(nst.tensors(shape=(3, 4), layouts=("transposed",)))
def test_transposed_layout(t):
    assert t.shape == (3, 4) and t.stride() != (4, 1)


@given(nst.tensors(shape=(3, 4), layouts=("strided",)))
def test_strided_layout_is_a_stepped_slice(t):
    assert t.shape == (3, 4)
    assert t.untyped_storage().nbytes() >= t.numel() * t.element_size()


@given(nst.tensors(shape=(3, 4), layouts=("expanded",)))
def test_expanded_layout_has_zero_strides(t):
    assert t.shape == (3, 4)
    assert 0 in t.stride() or t.stride() == (4, 1)  # both dims drawn as "not expanded" is allowed


def test_expanded_layout_reaches_stride_zero():
    t = find(nst.tensors(shape=(3, 4), layouts=("expanded",)), lambda t: 0 in t.stride())
    assert t.shape == (3, 4)


@given(nst.tensors(shape=(2, 3, 4, 5), layouts=("channels_last",)))
def test_channels_last_layout(t):
    assert t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()


@given(nst.tensors(shape=(2, 3), layouts=("offset",)))
def test_offset_layout(t):
    assert t.storage_offset() > 0


@given(nst.tensors(dtype=torch.int64, shape=(50,)))
def test_int64_values_fit_int32(t):
    # The 64-bit rule computes int64 in int32 on native ops: values stay in range.
    assert t.abs().max() < 2**31


@given(nst.tensors(dtype=torch.float64, shape=(50,)))
def test_float64_values_are_float32_representable(t):
    assert torch.equal(t, t.float().double())


@given(nst.tensors(dtype=torch.float32, shape=(64,)))
def test_values_are_finite_unless_special_values_are_asked_for(t):
    assert t.dtype == torch.float32 and t.shape == (64,) and torch.isfinite(t).all()


def test_special_values_are_drawn():
    t = find(nst.tensors(dtype=torch.float32, shape=(16,), special=True),
             lambda t: bool(torch.isnan(t).any() and torch.isinf(t).any()))
    assert torch.isnan(t).any()


# ---- mirror ---------------------------------------------------------------------
@given(nst.tensors(dtype=nst.dtypes(integral=True, boolean=True, wide=True)))
def test_mirror_keeps_layout_and_values(t):
    d = mirror(t, "neuron")
    assert d.device.type == "neuron"
    assert (d.shape, d.stride(), d.storage_offset(), d.dtype) == (t.shape, t.stride(), t.storage_offset(), t.dtype)
    assert torch.equal(d.cpu(), t)


# ---- assert_parity catches mismatches -----------------------------------------------
def test_parity_passes_for_matching_ops():
    x = torch.randn(3, 4)
    assert_parity(torch.add, x, x.t().contiguous().t(), grad=True, path="both")


def test_parity_catches_a_value_mismatch():
    with pytest.raises(AssertionError, match="output 0"):
        assert_parity(lambda x: x + (1e-3 if x.device.type == "neuron" else 0.0), torch.randn(4))


def test_parity_catches_dtype_and_shape_mismatch():
    with pytest.raises(AssertionError, match="dtype differs"):
        assert_parity(lambda x: x.double() if x.device.type == "neuron" else x, torch.randn(4))
    with pytest.raises(AssertionError, match="shape differs"):
        assert_parity(lambda x: x[:2] if x.device.type == "neuron" else x[:3], torch.randn(4))


def test_parity_catches_an_in_place_difference():
    def f(x):
        if x.device.type == "neuron":
            x.add_(1)
        return x.shape[0]
    with pytest.raises(AssertionError, match="input 0 after the call"):
        assert_parity(f, torch.randn(4))


class _DeviceDependentGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * (3 if g.device.type == "neuron" else 2)


def test_parity_catches_a_gradient_mismatch():
    with pytest.raises(AssertionError, match="grad of input 0"):
        assert_parity(_DeviceDependentGrad.apply, torch.randn(4), grad=True)


def test_parity_compares_module_parameter_grads_and_buffers():
    assert_parity(torch.nn.BatchNorm1d(3), torch.randn(4, 3), grad=True)

    class Leaky(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3))

        def forward(self, x):
            return (x * _DeviceDependentGrad.apply(self.w)).sum()  # same output, different weight grad
    with pytest.raises(AssertionError, match="grad of parameter 'w'"):
        assert_parity(Leaky(), torch.randn(3), grad=True)


def test_parity_requires_matching_errors():
    assert_parity(torch.mm, torch.randn(2, 3), torch.randn(2, 3))  # both raise RuntimeError: fine
    with pytest.raises(AssertionError, match="neuron raised but CPU did not"):
        assert_parity(lambda x: x if x.device.type == "cpu" else x.view(7), torch.randn(4))
    with pytest.raises(AssertionError, match="CPU reference raised"):
        assert_parity(torch.mm, torch.randn(2, 3), torch.randn(2, 3), allow_errors=False)


def test_parity_checks_outputs_are_on_neuron():
    with pytest.raises(AssertionError, match="not on neuron"):
        assert_parity(lambda x: x.cpu() * 2, torch.randn(3))


# ---- tolerances know the dtype rules ----------------------------------------------------
def test_tolerances_per_dtype():
    assert tolerance(torch.int32) == (0.0, 0.0) and tolerance(torch.bool) == (0.0, 0.0)
    assert tolerance(torch.bfloat16)[0] > tolerance(torch.float16)[0] > tolerance(torch.float32)[0]
    assert tolerance(torch.float32, grad=True)[0] > tolerance(torch.float32)[0]


@pytest.fixture
def set_policy():
    """Sets the dtype policy for one test, whatever the environment says."""
    from torch_neuron_sim import dtype_policy
    saved = dtype_policy.get_dtype_policy()
    yield dtype_policy.set_dtype_policy
    dtype_policy.set_dtype_policy(saved)


def test_float64_tolerance_follows_the_64bit_rule(set_policy):
    set_policy("trainium")
    assert dtype_rule_active()
    assert tolerance(torch.float64)[0] >= tolerance(torch.float32)[0]  # computed in float32 on native ops
    a, b = torch.randn(8, 8, dtype=torch.float64), torch.randn(8, 8, dtype=torch.float64)
    assert_parity(torch.mm, a, b)  # float64 mm runs in float32 on neuron: within the rule's tolerance
    with pytest.raises(AssertionError, match="output 0"):
        assert_parity(torch.mm, a, b, rtol=1e-12, atol=0.0)  # and it really did not run in float64


def test_float64_tolerance_is_exact_under_exact_policy(set_policy):
    set_policy("exact")
    assert not dtype_rule_active()
    assert tolerance(torch.float64) == (1e-7, 1e-7)
    a, b = torch.randn(8, 8, dtype=torch.float64), torch.randn(8, 8, dtype=torch.float64)
    assert_parity(torch.mm, a, b, rtol=1e-12, atol=0.0)


# ---- op tracking assertions ----------------------------------------------------------------
def test_track_and_assert_where_ops_ran():
    x = torch.ones(3, device="neuron")
    with track_neuron_ops() as ops:
        x + x
        torch.cumprod(x, 0)
    assert "aten::add.Tensor" in ops.executed and any(n.startswith(FALLBACK_OP) for n in ops.fallback)
    assert_op_runs_on_neuron("add")
    assert_op_runs_on_neuron("aten::add.Tensor")
    assert_op_falls_back_on_cpu(FALLBACK_OP)  # exact, as recorded (a structured op: the functional name)
    assert_op_did_not_run_on_neuron("cumprod")
    assert_op_does_not_run("aten::sort")
    with pytest.raises(AssertionError, match="to run on neuron"):
        assert_op_runs_on_neuron("cumprod")
    with pytest.raises(AssertionError, match="to fall back"):
        assert_op_falls_back_on_cpu("aten::add.Tensor")
    with pytest.raises(AssertionError, match="not to run at all"):
        assert_op_does_not_run("add")
    track_neuron_ops()  # clears
    assert_op_does_not_run("add")


def test_assert_no_fallback():
    x = torch.ones(3, device="neuron")
    with assert_no_fallback():
        x * 2 + 1
    with pytest.raises(FallbackError, match="cumprod"):
        with assert_no_fallback():
            torch.cumprod(x, 0)
    assert_op_falls_back_on_cpu(FALLBACK_OP)  # the tracker was not cleared


def test_execution_paths_route_ops_and_restore_the_table():
    x = torch.ones(3, device="neuron")
    before = torch_neuron_sim.native_ops.current()
    with execution_path("fallback"):
        track_neuron_ops()
        x + x
        assert_op_falls_back_on_cpu("aten::add.Tensor")
    with execution_path("native", [FALLBACK_OP]):
        track_neuron_ops()
        torch.cumprod(x, 0)
        assert_op_runs_on_neuron("cumprod")
    assert torch_neuron_sim.native_ops.current() == before
    with pytest.raises(ValueError):
        with execution_path("gpu"):
            pass


# ---- the tutorial's example runs as written ------------------------------------------------------
def test_docs_ten_line_example_runs():
    from pathlib import Path
    text = (Path(__file__).parents[3] / "docs" / "testing.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    # The example's own lines stand as its source: Hypothesis reads a lambda's
    # source to describe it, and a real path would give it the page's prose
    # (Python 3.12's tokenizer raises on that prose).
    import linecache
    name = "<docs/testing.md example>"
    linecache.cache[name] = (len(code), None, code.splitlines(keepends=True), name)
    namespace: dict = {}
    exec(compile(code, name, "exec"), namespace)
    namespace["test_my_model"]()
