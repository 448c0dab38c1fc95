"""The device's numerics (docs/numerics.md): stochastic rounding, NEURON_CC_FLAGS
auto-cast, integer math in fp32 and fp8 casts, each against a NumPy reference,
and every rule off = the CPU's results bit for bit."""
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import torch_neuron_sim
from conftest import run_python
from torch_neuron_sim.execution import numerics as nx

N = "neuron"
VARS = ("NEURON_RT_STOCHASTIC_ROUNDING_EN", "NEURON_RT_STOCHASTIC_ROUNDING_SEED", "NEURON_CC_FLAGS")


@pytest.fixture(autouse=True)
def clean_numerics(monkeypatch):
    """Each test starts with every switch off and leaves them off."""
    torch_neuron_sim.native_ops.load()
    for v in VARS:
        monkeypatch.delenv(v, raising=False)
    nx.reread()
    yield
    monkeypatch.undo()
    for v in VARS:
        monkeypatch.delenv(v, raising=False)
    nx.reread()


def switch(monkeypatch, **env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    nx.reread()


# ---- NumPy references -------------------------------------------------------

def round_np(x: np.ndarray, mantissa: int, emin: int) -> np.ndarray:
    """fp32 values rounded to nearest even in a format with `mantissa` bits and
    smallest normal exponent `emin` (bf16: 7, -126; fp16: 10, -14; tf32: 10, -126)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros_like(x)
    nz = x != 0
    e = np.maximum(np.floor(np.log2(np.abs(x[nz]))), emin)
    ulp = np.exp2(e - mantissa)
    out[nz] = np.round(x[nz] / ulp) * ulp  # np.round: ties to even
    return out.astype(np.float32)


def neighbours_np(x: float, mantissa: int, emin: int) -> tuple[float, float]:
    """The two values of the format around x, and the fraction of the way up."""
    e = max(np.floor(np.log2(abs(x))), emin)
    ulp = 2.0 ** (e - mantissa)
    lo = np.floor(x / ulp) * ulp
    return lo, lo + ulp


# ---- Rule off: today's behaviour, bit for bit ------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int32])
def test_rules_off_every_result_equals_the_cpu(dtype):
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(33, 17, generator=g) * 100).to(dtype)
    b = (torch.randn(17, 9, generator=g) * 100).to(dtype)
    idx = torch.randint(0, 33, (50,), generator=g)
    src = (torch.randn(50, 17, generator=g) * 1e3).to(dtype)
    for fn in (lambda a, b: a @ b, lambda a, b: a + a, lambda a, b: a.sum(0),
               lambda a, b: torch.zeros_like(a).index_add_(0, idx.to(a.device), src.to(a.device))):
        got = fn(a.to(N), b.to(N)).cpu()
        assert torch.equal(got, fn(a, b)), fn
    info = torch_neuron_sim.numerics()
    assert not info["stochastic_rounding"] and info["auto_cast"] == "none"


# ---- 1. Stochastic rounding -------------------------------------------------

def add_half_2048_times(n=4096):
    x = torch.full((n,), 1024.0, dtype=torch.float16, device=N)
    for _ in range(2048):
        x = x + 0.5
    return x.cpu().float()


def test_aws_check_fp16_1024_plus_half_rne_stays_1024(monkeypatch):
    assert torch.equal(add_half_2048_times(256), torch.full((256,), 1024.0))


def test_aws_check_fp16_1024_plus_half_sr_reaches_2048_on_average(monkeypatch):
    switch(monkeypatch, NEURON_RT_STOCHASTIC_ROUNDING_EN="1")
    x = add_half_2048_times()
    # Each element is 1024 + 0.5 * 2048 = 2048 in expectation (AWS reports 2056 for one run);
    # one element's spread is about 23, the mean of 4096 elements' well under 1.
    assert abs(x.mean().item() - 2048) < 3
    assert 1900 < x.min().item() and x.max().item() < 2200
    assert torch_neuron_sim.numerics()["stochastic_rounding"]


@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(x=st.floats(min_value=-6e4, max_value=6e4, allow_nan=False, width=32).filter(lambda v: abs(v) > 1e-3),
       dtype=st.sampled_from([torch.bfloat16, torch.float16]))
def test_sr_is_unbiased_against_numpy_neighbours(x, dtype):
    import os
    os.environ["NEURON_RT_STOCHASTIC_ROUNDING_EN"] = "1"
    nx.reread()
    try:
        mant, emin = (7, -126) if dtype == torch.bfloat16 else (10, -14)
        lo, hi = neighbours_np(float(np.float32(x)), mant, emin)
        n = 20000
        # An op whose fp32 result is x: (x as fp32) * 1 in the narrow dtype would round
        # the input first, so the cast on the device is the op here.
        got = torch.full((n,), x, dtype=torch.float32, device=N).to(dtype).cpu().double().numpy()
        assert set(np.unique(got)) <= {lo, hi}
        if hi - lo > 0:
            p = (float(np.float32(x)) - lo) / (hi - lo)
            frac_up = float(np.mean(got == hi))
            assert abs(frac_up - p) <= 5 * np.sqrt(max(p * (1 - p), 1e-4) / n) + 1e-3
    finally:
        del os.environ["NEURON_RT_STOCHASTIC_ROUNDING_EN"]
        nx.reread()


def test_sr_op_results_are_neighbours_of_the_fp32_result_and_unbiased(monkeypatch):
    switch(monkeypatch, NEURON_RT_STOCHASTIC_ROUNDING_EN="1")
    g = torch.Generator().manual_seed(1)
    a = torch.randn(256, 64, generator=g).bfloat16()
    b = torch.randn(64, 32, generator=g).bfloat16()
    exact = a.float() @ b.float()  # fp32 accumulation, as the Tensor Engine
    draws = torch.stack([(a.to(N) @ b.to(N)).cpu().float() for _ in range(64)]).double().numpy()
    ex = exact.numpy().astype(np.float64)
    ulp = np.exp2(np.maximum(np.floor(np.log2(np.abs(ex))), -126) - 7)
    lo = np.floor(ex / ulp) * ulp
    assert np.all((draws == lo) | (draws == lo + ulp))  # always one of the two bf16 neighbours
    # Unbiased: over all elements, the mean error in ulps is zero within the noise.
    err = (draws.mean(0) - ex) / ulp
    assert abs(err.mean()) < 0.02
    # fp32 ops are untouched.
    x = torch.randn(100, generator=g)
    assert torch.equal((x.to(N) * 3).cpu(), x * 3)


def test_sr_in_place_update_keeps_small_steps_that_rne_loses(monkeypatch):
    w0 = torch.full((10000,), 1.0, dtype=torch.bfloat16)
    step = torch.full((10000,), 1e-3, dtype=torch.bfloat16)  # under half a bf16 ulp at 1.0
    w = w0.to(N)
    for _ in range(100):
        w.add_(step.to(N), alpha=-1.0)
    assert torch.equal(w.cpu(), w0)  # round to nearest loses every step
    switch(monkeypatch, NEURON_RT_STOCHASTIC_ROUNDING_EN="1")
    w = w0.to(N)
    for _ in range(100):
        w.add_(step.to(N), alpha=-1.0)
    assert abs(w.cpu().float().mean().item() - (1 - 100 * float(step[0]))) < 5e-3


def test_sr_is_reproducible_run_to_run_and_follows_the_seed():
    code = """
        import torch, torch_neuron_sim
        x = torch.full((64,), 1.0, device="neuron") / 3
        print((x.bfloat16() * 1.7).cpu().float().tolist())
    """
    runs = [run_python(code, env={"NEURON_RT_STOCHASTIC_ROUNDING_EN": "1",
                                  "NEURON_RT_STOCHASTIC_ROUNDING_SEED": s}) for s in ("7", "7", "8")]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert runs[0].stdout == runs[1].stdout
    assert runs[0].stdout != runs[2].stdout


def test_non_integer_seed_is_a_clear_error_at_first_use_and_the_process_goes_on(monkeypatch):
    x = torch.ones(4, dtype=torch.bfloat16, device=N)
    switch(monkeypatch, NEURON_RT_STOCHASTIC_ROUNDING_EN="1", NEURON_RT_STOCHASTIC_ROUNDING_SEED="abc")
    with pytest.raises(ValueError, match="NEURON_RT_STOCHASTIC_ROUNDING_SEED must be a non-negative integer, "
                                         "got 'abc'"):
        x + x
    monkeypatch.setenv("NEURON_RT_STOCHASTIC_ROUNDING_SEED", "3")
    assert torch.equal((x + x).cpu(), torch.full((4,), 2.0, dtype=torch.bfloat16))
    assert torch_neuron_sim.numerics()["stochastic_rounding_seed"] == 3


def test_sr_applies_in_a_compiled_graph(monkeypatch):
    switch(monkeypatch, NEURON_RT_STOCHASTIC_ROUNDING_EN="1")
    torch._dynamo.reset()
    f = torch.compile(lambda x: x + 0.5, backend="neuron")
    out = f(torch.full((4096,), 1024.0, dtype=torch.float16, device=N)).cpu().float()
    assert set(out.unique().tolist()) == {1024.0, 1025.0}
    assert 0.4 < (out == 1025).float().mean().item() < 0.6
    torch._dynamo.reset()


# ---- 2. Auto-cast -----------------------------------------------------------

TYPES = {"bf16": (7, -126), "fp16": (10, -14), "tf32": (10, -126)}


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 24), k=st.integers(1, 24), n=st.integers(1, 24), seed=st.integers(0, 2**16),
       kind=st.sampled_from(sorted(TYPES)), op=st.sampled_from(["mm", "addmm", "linear", "bmm"]))
def test_matmult_equals_computing_on_inputs_cast_to_the_type(m, k, n, seed, kind, op):
    import os
    os.environ["NEURON_CC_FLAGS"] = f"--auto-cast=matmult --auto-cast-type={kind}"
    nx.reread()
    try:
        g = torch.Generator().manual_seed(seed)
        a, b, c = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g), torch.randn(n, generator=g)
        mant, emin = TYPES[kind]
        ca = torch.from_numpy(round_np(a.numpy(), mant, emin))
        cb = torch.from_numpy(round_np(b.numpy(), mant, emin))
        fn = {"mm": lambda a, b, c: a @ b, "addmm": lambda a, b, c: torch.addmm(c, a, b),
              "linear": lambda a, b, c: torch.nn.functional.linear(a, b.t().contiguous(), c),
              "bmm": lambda a, b, c: torch.bmm(a[None].expand(2, -1, -1), b[None].expand(2, -1, -1))}[op]
        got = fn(a.to(N), b.to(N), c.to(N)).cpu()
        want = fn(ca, cb, c)  # the bias is added in fp32: only the Tensor Engine's operands are cast
        assert got.dtype == torch.float32
        assert torch.equal(got, want)
    finally:
        del os.environ["NEURON_CC_FLAGS"]
        nx.reread()


def test_matmult_leaves_other_ops_and_none_leaves_everything(monkeypatch):
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(40, 30, generator=g), torch.randn(30, 20, generator=g)
    assert torch.equal((a.to(N) @ b.to(N)).cpu(), a @ b)  # default: none
    switch(monkeypatch, NEURON_CC_FLAGS="--auto-cast none --auto-cast-type bf16")
    assert torch.equal((a.to(N) @ b.to(N)).cpu(), a @ b)
    switch(monkeypatch, NEURON_CC_FLAGS="-O1 --model-type=transformer --auto-cast matmult --auto-cast-type bf16")
    assert torch.equal((a.to(N) * 1.001).cpu(), a * 1.001)  # not a matmul
    assert torch.equal((a.to(N) @ b.to(N)).cpu(), a.bfloat16().float() @ b.bfloat16().float())
    info = torch_neuron_sim.numerics()
    assert info["auto_cast"] == "matmult" and info["auto_cast_type"] == "bf16"


def test_matmult_casts_convolutions_and_backward_matmuls(monkeypatch):
    switch(monkeypatch, NEURON_CC_FLAGS="--auto-cast=matmult --auto-cast-type=bf16")
    g = torch.Generator().manual_seed(4)
    x, w = torch.randn(2, 3, 8, 8, generator=g), torch.randn(4, 3, 3, 3, generator=g)
    got = torch.nn.functional.conv2d(x.to(N), w.to(N)).cpu()
    assert torch.equal(got, torch.nn.functional.conv2d(x.bfloat16().float(), w.bfloat16().float()))
    a = torch.randn(16, 8, generator=g).to(N).requires_grad_()
    b = torch.randn(8, 4, generator=g)
    (a @ b.to(N)).sum().backward()
    want = torch.ones(16, 4).bfloat16().float() @ b.bfloat16().float().t()
    assert torch.equal(a.grad.cpu(), want)


def test_auto_cast_all_computes_every_fp32_op_in_the_type(monkeypatch):
    switch(monkeypatch, NEURON_CC_FLAGS="--auto-cast all --auto-cast-type fp16")
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(1000, generator=g), torch.randn(1000, generator=g)
    got = (a.to(N) + b.to(N)).cpu()
    assert got.dtype == torch.float32
    assert torch.equal(got, (a.half().float() + b.half().float()).half().float())


def test_auto_cast_applies_in_a_compiled_graph(monkeypatch):
    switch(monkeypatch, NEURON_CC_FLAGS="--auto-cast=matmult --auto-cast-type=bf16")
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(6)
    a, b = torch.randn(32, 16, generator=g), torch.randn(16, 8, generator=g)
    got = torch.compile(lambda a, b: a @ b, backend="neuron")(a.to(N), b.to(N)).cpu()
    assert torch.equal(got, a.bfloat16().float() @ b.bfloat16().float())
    torch._dynamo.reset()


@pytest.mark.parametrize("flags,flag,choices", [
    ("--auto-cast=matmul", "--auto-cast", "'none', 'matmult', 'all'"),
    ("--auto-cast matmult --auto-cast-type bfloat16", "--auto-cast-type", "'bf16', 'fp16', 'tf32', 'fp8_e4m3'"),
])
def test_malformed_cc_flags_are_the_compilers_error_at_the_first_op(monkeypatch, flags, flag, choices):
    a = torch.ones(2, 2, device=N)
    switch(monkeypatch, NEURON_CC_FLAGS=flags)
    with pytest.raises(RuntimeError) as err:
        a @ a
    msg = str(err.value)
    assert f"argument {flag}: invalid choice" in msg and choices in msg
    with pytest.raises(RuntimeError, match="invalid choice"):
        torch_neuron_sim.numerics()
    monkeypatch.setenv("NEURON_CC_FLAGS", "--auto-cast=matmult")  # fixed: the next op reads it again
    assert torch.equal((a @ a).cpu(), torch.full((2, 2), 2.0))


# ---- 3. Integers in fp32 ----------------------------------------------------

def fp32_sum_of_products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(m, k) x (k, n) with k <= 2 and exact products: the exact sum rounded once to fp32."""
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 8), k=st.integers(1, 2), n=st.integers(1, 8), seed=st.integers(0, 2**16),
       dtype=st.sampled_from([torch.int32, torch.int64]))
def test_integer_mm_equals_float32_arithmetic(m, k, n, seed, dtype):
    rng = np.random.default_rng(seed)
    a = rng.integers(-4096, 4096, size=(m, k))  # products < 2^24: exact in fp32; their sums are not
    b = rng.integers(-4096, 4096, size=(k, n))
    got = (torch.tensor(a, dtype=dtype).to(N) @ torch.tensor(b, dtype=dtype).to(N)).cpu()
    assert got.dtype == dtype
    assert np.array_equal(got.numpy(), fp32_sum_of_products(a, b).astype(np.int64))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 64), size=st.integers(1, 8), seed=st.integers(0, 2**16),
       op=st.sampled_from(["scatter_add", "index_add"]))
def test_integer_scatter_add_equals_float32_arithmetic(n, size, seed, op):
    rng = np.random.default_rng(seed)
    src = rng.integers(-(2**26), 2**26, size=n).astype(np.int32)
    index = rng.integers(0, size, size=n)
    acc = np.zeros(size, dtype=np.float32)
    for i, v in zip(index, src):  # in index order, each sum rounded to fp32
        acc[i] = np.float32(acc[i] + np.float32(v))
    base = torch.zeros(size, dtype=torch.int32, device=N)
    s, ix = torch.tensor(src).to(N), torch.tensor(index).to(N)
    got = base.scatter_add(0, ix, s) if op == "scatter_add" else base.index_add(0, ix, s)
    assert np.array_equal(got.cpu().numpy(), acc.astype(np.int64))


def test_integer_below_2_24_is_exact_and_above_rounds():
    a = torch.tensor([[2**23 + 1]], dtype=torch.int32)
    one = torch.ones(1, 1, dtype=torch.int32)
    assert (a.to(N) @ one.to(N)).item() == 2**23 + 1
    b = torch.tensor([[2**24 + 1]], dtype=torch.int32)
    assert (b.to(N) @ one.to(N)).item() == 2**24  # fp32 has no 2^24 + 1
    assert (b @ one).item() == 2**24 + 1  # the CPU's integer math


def test_integer_rule_is_off_under_the_exact_dtype_policy():
    b = torch.tensor([[2**24 + 1]], dtype=torch.int32)
    one = torch.ones(1, 1, dtype=torch.int32)
    torch_neuron_sim.dtype_policy.set_dtype_policy("exact")
    try:
        assert (b.to(N) @ one.to(N)).item() == 2**24 + 1
        assert not torch_neuron_sim.numerics()["integers_in_fp32"]
    finally:
        torch_neuron_sim.dtype_policy.set_dtype_policy("trainium")


def test_report_lists_integer_ops_that_would_round_with_their_source_line():
    big = torch.tensor([[2**24 + 3]], dtype=torch.int32).to(N)
    one = torch.ones(1, 1, dtype=torch.int32).to(N)
    small = torch.tensor([[5]], dtype=torch.int32).to(N)
    with torch_neuron_sim.report() as r:
        small @ one
        big @ one  # this line
        counts = torch.zeros(4, dtype=torch.int32, device=N)
        counts.index_add_(0, torch.tensor([0, 0], device=N), torch.tensor([2**24, 7], dtype=torch.int32, device=N))
    rows = {w["op"]: w for w in r.data["would_round_on_trainium"]}
    assert set(rows) == {"aten::mm", "aten::index_add_"}
    assert rows["aten::mm"]["count"] == 1
    assert rows["aten::mm"]["sites"][0]["site"].endswith(f"test_numerics_rules.py:{big_line()}")
    assert "would round on Trainium" in r.text()


def big_line() -> int:
    import inspect
    src, start = inspect.getsourcelines(test_report_lists_integer_ops_that_would_round_with_their_source_line)
    return start + next(i for i, line in enumerate(src) if "# this line" in line)


# ---- 4. fp8 -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_fp8_casts_round_to_nearest_as_stored_and_stochastically_under_sr(monkeypatch, dtype):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(4096, generator=g) * 4
    want = x.to(dtype)
    assert torch.equal(x.to(N).to(dtype).cpu().view(torch.uint8), want.view(torch.uint8))
    switch(monkeypatch, NEURON_RT_STOCHASTIC_ROUNDING_EN="1")
    v = torch.full((20000,), 1.1)  # between two fp8 values: e4m3 1.0/1.125, e5m2 1.0/1.25
    got = v.to(N).to(dtype).cpu().float()
    lo, hi = 1.0, (1.125 if dtype == torch.float8_e4m3fn else 1.25)
    assert set(got.unique().tolist()) == {lo, hi}
    p = (1.1 - lo) / (hi - lo)
    assert abs((got == hi).float().mean().item() - p) < 0.02
