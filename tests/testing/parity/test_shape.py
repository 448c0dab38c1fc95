"""Shape ops: views made contiguous, cat/stack/split and friends, flips,
rolls, repeats, padding by concatenation, on every layout."""
import pytest
import torch
from hypothesis import given, strategies as st

from _cases import BF16, F32, F32_BF16, Case, cases, parity, parity_settings
from torch_neuron_sim.testing import strategies as nst


def _x(data, dtype, min_dims=1, max_dims=4, min_side=0):
    return data.draw(nst.tensors(dtype=dtype, shape=nst.shapes(min_dims, max_dims, min_side, 4)))


def _dim(data, x):
    return data.draw(st.integers(-x.dim(), x.dim() - 1))


def _cat(dtype, data):
    x = _x(data, dtype)
    d = _dim(data, x)
    parts = [x]
    for _ in range(data.draw(st.integers(1, 3))):
        shape = list(x.shape)
        shape[d] = data.draw(st.integers(0, 3))
        parts.append(data.draw(nst.tensors(dtype=dtype, shape=tuple(shape))))
    parity(lambda *ts: torch.cat(ts, d), *parts, grad=True)


def _stack(dtype, data):
    x = _x(data, dtype, min_dims=0, max_dims=3)
    ys = [data.draw(nst.tensors(dtype=dtype, shape=x.shape)) for _ in range(data.draw(st.integers(0, 2)))]
    d = data.draw(st.integers(-x.dim() - 1, x.dim()))
    parity(lambda *ts: (torch.stack(ts, d), torch.hstack(ts) if x.dim() else torch.stack(ts),
                        torch.vstack(ts), torch.dstack(ts)), x, *ys, grad=True)


def _split(dtype, data):
    x = _x(data, dtype, min_side=1)
    d = _dim(data, x)
    k = data.draw(st.integers(1, 3))
    parity(lambda t: (torch.split(t, k, d), torch.chunk(t, k, d), torch.unbind(t, d),
                      torch.tensor_split(t, k, d)), x, grad=True)
    sizes = [1, x.shape[d] - 1] if x.shape[d] > 1 else [1]
    parity(lambda t: [s.clone() for s in torch.split(t, sizes, d)], x, grad=True)


def _views(dtype, data):
    x = _x(data, dtype, min_dims=2, min_side=1)
    d = _dim(data, x)
    parity(lambda t: (t.transpose(0, -1).contiguous(), t.permute(*reversed(range(t.dim()))).reshape(-1),
                      t.flatten(1), t.unsqueeze(d).squeeze(d), t.movedim(0, -1).clone(), t.narrow(d, 0, 1) * 1,
                      t.select(d, 0).clone(), t.unflatten(0, (1, t.shape[0])).clone(), t.mT.contiguous(),
                      t.expand(2, *t.shape).clone()), x, grad=True)


def _reorder(dtype, data):
    x = _x(data, dtype, min_side=1)
    d = _dim(data, x)
    shift = data.draw(st.integers(-3, 3))
    parity(lambda t: (torch.flip(t, (d,)), torch.roll(t, shift, d), torch.roll(t, shift),
                      torch.rot90(t, 1, (0, -1)) if t.dim() >= 2 else t * 1, torch.fliplr(t) if t.dim() >= 2 else t * 1),
           x, grad=True)


def _repeat(dtype, data):
    x = _x(data, dtype, max_dims=3)
    reps = tuple(data.draw(st.integers(1, 2)) for _ in range(x.dim() + data.draw(st.integers(0, 1))))
    d = _dim(data, x)
    parity(lambda t: (t.repeat(*reps), torch.tile(t, reps), torch.repeat_interleave(t, 2, d)), x, grad=True)
    if x.shape[d]:
        counts = data.draw(nst.tensors(dtype=torch.int64, shape=(x.shape[d],), low=0, high=2, layouts=("contiguous",)))
        parity(lambda t, c: torch.repeat_interleave(t, c, d), x, counts, grad=True)


def _misc(dtype, data):
    x = _x(data, dtype, min_dims=1, max_dims=2, min_side=1)
    parity(lambda t: (torch.atleast_3d(t).clone(), torch.block_diag(t, t), torch.cartesian_prod(t.flatten(), t.flatten()),
                      torch.meshgrid(t.flatten(), t.flatten(), indexing="ij")[0].clone(), torch.combinations(t.flatten()[:4])),
           x, grad=True)


def _unfold_view(dtype, data):
    x = _x(data, dtype, min_dims=1, max_dims=3, min_side=2)
    d = _dim(data, x)
    parity(lambda t: t.unfold(d, 2, 1) * 2, x, grad=True)
    parity(lambda t: torch.as_strided(t.contiguous(), (2,), (1,)) + 0, x, grad=True)


def _empty_like(dtype, data):
    x = _x(data, dtype)
    parity(lambda t: (torch.zeros_like(t), torch.ones_like(t), torch.full_like(t, 3), t.new_zeros(2, 3),
                      t.new_full((2,), 1.5), torch.empty_like(t).fill_(2)), x)


def _factory_parity(dtype, data):
    n = data.draw(st.integers(0, 6))

    def f(marker):
        dev = marker.device
        return (torch.arange(n, dtype=dtype, device=dev), torch.linspace(0, 1, n, dtype=dtype, device=dev),
                torch.eye(n, dtype=dtype, device=dev), torch.full((n, 2), 7, dtype=dtype, device=dev),
                torch.zeros(n, dtype=dtype, device=dev), torch.ones(2, n, dtype=dtype, device=dev),
                torch.logspace(0, 1, n, dtype=dtype, device=dev), torch.tril_indices(n, n, device=dev),
                torch.scalar_tensor(2.5, dtype=dtype, device=dev), torch.arange(1, n + 1, 2, device=dev))
    parity(f, torch.empty(0))


def _casts(dtype, data):
    x = _x(data, dtype)
    parity(lambda t: (t.to(torch.float32), t.to(torch.bfloat16), t.to(torch.int32), t.to(torch.bool), t.double(),
                      t.long(), t.half(), t.to(torch.uint8) if not t.is_floating_point() else t.abs().to(torch.uint8)), x)


CASES: list[Case] = []
CASES += cases("cat", (F32, BF16, torch.int32, torch.bool), _cat)
CASES += cases("stack", F32_BF16, _stack)
CASES += cases("split", F32_BF16, _split)
CASES += cases("views", F32_BF16, _views)
CASES += cases("reorder", (F32, BF16, torch.int32), _reorder)
CASES += cases("repeat", F32_BF16, _repeat)
CASES += cases("misc", (F32,), _misc)
CASES += cases("unfold_view", (F32,), _unfold_view)
CASES += cases("like_factories", (F32, BF16, torch.int32), _empty_like)
CASES += cases("factories", (F32, BF16), _factory_parity)
CASES += cases("casts", (F32, BF16, torch.int32, torch.float64, torch.int64, torch.bool), _casts)


@pytest.mark.parametrize("case", CASES, ids=str)
@parity_settings
@given(data=st.data())
def test_shape(case, data):
    case(data)
