"""PyTorch's device-generic tests that concern neuron, run on the CPU and on neuron alike.

PyTorch instantiates its device-generic tests (test_torch.py, test_nn.py) for every device
type, PrivateUse1 included; its test files are not shipped with the wheel, so the cases
below restate the ones the device is held to, each asserting what PyTorch's test asserts
on both devices."""
from __future__ import annotations

import warnings

import pytest
import torch

import torch_neuron_sim  # noqa: F401  (registers the neuron device)
from torch_neuron_sim.testing import track_neuron_ops

DEVICES = ("cpu", "neuron")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32])
def test_randperm_resizes_a_wrongly_sized_out(device, dtype):
    # test_randperm's out= case: a wrong size is resized to n, without a warning.
    for size, n in ((3, 5), (10, 5), (0, 4), (5, 5)):
        out = torch.empty(size, dtype=dtype, device=device)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "An output with one or more elements was resized"
            res = torch.randperm(n, out=out, dtype=dtype, device=device)
        assert res is out and out.shape == (n,) and out.dtype == dtype and out.device.type == device
        assert sorted(out.cpu().tolist()) == list(range(n))
    with pytest.raises(RuntimeError, match="n must be non-negative, got-1"):
        torch.randperm(-1, out=torch.empty(3, dtype=torch.long, device=device))


def test_randperm_out_is_a_tracked_fallback():
    out = torch.empty(2, dtype=torch.long, device="neuron")
    with track_neuron_ops() as ops:
        torch.randperm(6, out=out)
    assert ops.fallback == ["aten::randperm.out"] and out.shape == (6,)


_FMIN, _FMAX = torch.finfo(torch.float).min, torch.finfo(torch.float).max
_DMIN, _DMAX = torch.finfo(torch.double).min, torch.finfo(torch.double).max


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_uniform_from_to(device, dtype):
    # test_uniform_from_to: every (from, to) pair either raises PyTorch's error or fills the
    # tensor inside [from, to). On neuron uniform_ is not a native op: it runs on the CPU in the
    # tensor's own dtype, so float64 is not computed in float32 here.
    values = [_DMIN, _FMIN, -42, 0, 42, _FMAX, _DMAX]
    for lo in values:
        for hi in values:
            t = torch.empty(2000, dtype=dtype, device=device)
            info = torch.finfo(dtype)
            if dtype == torch.float32 and not (info.min <= lo <= info.max and info.min <= hi <= info.max):
                with pytest.raises(RuntimeError, match="out of bounds for float"):
                    t.uniform_(lo, hi)
                continue
            if not lo <= hi:
                with pytest.raises(RuntimeError, match="uniform_ expects to return a \\[from, to\\) range"):
                    t.uniform_(lo, hi)
            elif hi - lo > info.max:
                with pytest.raises(RuntimeError, match="uniform_ expects to-from"):
                    t.uniform_(lo, hi)
            else:
                t.uniform_(lo, hi)
                got = t.cpu().double()
                if lo == hi:
                    assert got.min() == lo and got.max() == hi
                else:
                    assert lo <= got.min() and got.max() < hi, (lo, hi, got.min(), got.max())
                    span = hi - lo  # the draws cover the range, not one end of it
                    assert got.min() < lo + 0.1 * span and got.max() >= hi - 0.1 * span, (lo, hi)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int16])
def test_random_from_to(device, dtype):
    # test_random_from_to: from out of the dtype's range, to - 1 out of it, and from >= to
    # raise PyTorch's errors; every other pair fills the tensor inside [from, to).
    i64min, i64max = torch.iinfo(torch.int64).min, torch.iinfo(torch.int64).max
    lo_dt, hi_dt = torch.iinfo(dtype).min, torch.iinfo(dtype).max
    for lo in (i64min, lo_dt, -42, 0, 42):
        for hi in (-42, 0, 42, hi_dt, hi_dt + 1 if dtype != torch.int64 else hi_dt, i64max):
            t = torch.empty(2000, dtype=dtype, device=device)
            if not lo < hi:
                with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to'"):
                    t.random_(lo, hi)
            elif not lo_dt <= lo <= hi_dt:
                with pytest.raises(RuntimeError, match="from is out of bounds"):
                    t.random_(lo, hi)
            elif not lo_dt <= hi - 1 <= hi_dt:
                with pytest.raises(RuntimeError, match="to - 1 is out of bounds"):
                    t.random_(lo, hi)
            else:
                t.random_(lo, hi)
                got = t.cpu()
                assert lo <= got.min().item() and got.max().item() < hi, (lo, hi)
                span = hi - lo
                assert got.min().item() < lo + max(1, span // 10) and got.max().item() >= hi - max(1, span // 10)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("weights_dtype", [torch.float32, torch.float64])
def test_embedding_bag_per_sample_weights_failures(device, index_dtype, weights_dtype):
    # test_EmbeddingBag_per_sample_weights_failures: float embeddings with float64 weights
    # raise; the CPU says "have the same type as", every other device "expected scalar type".
    bag = torch.nn.EmbeddingBag(5, 2, mode="sum").to(device=device)
    idx = torch.tensor([3, 1, 1, 1, 4, 0], dtype=index_dtype, device=device)
    offsets = torch.tensor([0, 0, 3, 3, 6], dtype=index_dtype, device=device)
    psw = torch.randn(6, dtype=weights_dtype, device=device)
    if weights_dtype == torch.float32:
        ref = torch.nn.EmbeddingBag(5, 2, mode="sum")
        ref.load_state_dict(bag.state_dict())
        torch.testing.assert_close(bag(idx, offsets, psw).cpu(), ref(idx.cpu(), offsets.cpu(), psw.cpu()))
        return
    words = "have the same type as" if device == "cpu" else "expected scalar type Float but found Double"
    for grad in (True, False):  # with autograd, and the forward-only kernel
        with torch.set_grad_enabled(grad), pytest.raises(RuntimeError, match=words):
            bag(idx, offsets, psw)
    # Failure 2 of the same test: per_sample_weights with a mode other than "sum".
    mean_bag = torch.nn.EmbeddingBag(5, 2, mode="mean").to(device=device)
    with pytest.raises(NotImplementedError, match="only supported for mode='sum'"):
        mean_bag(idx, offsets, psw.float())
    assert bag(idx, offsets, psw.float()).shape == (5, 2)  # the process goes on


def test_a_float64_comparison_meets_the_64_bit_rule():
    # Where a generic test compares a native op's float64 result at float64 precision, the
    # device's 64-bit rule shows (docs/semantics.md): the sum is computed in float32.
    got = torch.ones(1, dtype=torch.float64, device="neuron") + 1e-10
    assert got.dtype == torch.float64 and got.cpu().item() == 1.0
    assert (torch.ones(1, dtype=torch.float64) + 1e-10).item() == 1.0000000001
