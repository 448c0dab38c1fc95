"""Indexing: advanced indexing (index, index_put_), index_select/add/copy/fill,
gather, scatter and its reductions, masked ops, nonzero, take, put_, the
*_scatter ops, searchsorted."""
import pytest
import torch
from hypothesis import given, strategies as st

from _cases import BF16, F32, F32_BF16, Case, cases, parity, parity_settings
from torch_neuron_sim.testing import strategies as nst


# Targets of in-place writes: every layout but expanded, where several
# elements share one memory location and a write is undefined.
WRITABLE = tuple(layout for layout in nst.LAYOUTS if layout != "expanded")


def _x(data, dtype, shape=None, min_side=1):
    shape = shape or data.draw(nst.shapes(1, 3, min_side, 5))
    return data.draw(nst.tensors(dtype=dtype, shape=shape, layouts=WRITABLE))


def _idx(data, size, shape=None, negative=True):
    return data.draw(nst.index_tensors(size, shape=shape, negative=negative))


def _index(dtype, data):
    x = _x(data, dtype)
    i = _idx(data, x.shape[0])
    if x.dim() > 1 and data.draw(st.booleans()):
        j = _idx(data, x.shape[1], shape=i.shape)
        parity(lambda x, i, j: x[i, j], x, i, j, grad=True)
    else:
        parity(lambda x, i: x[i], x, i, grad=True)


def _index_put(dtype, data):
    x = _x(data, dtype)
    i = _idx(data, x.shape[0], shape=(data.draw(st.integers(0, 4)),), negative=False)
    v = data.draw(nst.tensors(dtype=dtype, shape=(i.shape[0],) + tuple(x.shape[1:])))
    accumulate = data.draw(st.booleans())
    # Duplicate indices without accumulate leave the winner unspecified:
    # keep them unique then.
    if not accumulate:
        i = torch.unique(i)
        v = v[: i.shape[0]]
    parity(lambda x, i, v: x.index_put_((i,), v, accumulate=accumulate), x, i, v)
    parity(lambda x, i, v: torch.index_put(x, (i,), v, accumulate=accumulate), x, i, v, grad=True)


def _bool_mask(dtype, data):
    x = _x(data, dtype)
    m = data.draw(nst.tensors(dtype=torch.bool, shape=x.shape))
    parity(lambda x, m: (x[m], torch.masked_select(x, m), x.masked_fill(m, -1.5)), x, m, grad=True)
    parity(lambda x, m: x.masked_fill_(m, 2.0), x, m)
    parity(lambda x, m, s: x.masked_scatter(m, s), x, m, data.draw(nst.tensors(dtype=dtype, shape=x.shape)), grad=True)
    parity(lambda x, m: x.__setitem__(m, 0.5), x, m)


def _gather_scatter(dtype, data):
    x = _x(data, dtype, min_side=1)
    dim = data.draw(st.integers(0, x.dim() - 1))
    shape = tuple(data.draw(st.integers(1, s)) for s in x.shape)
    idx = _idx(data, x.shape[dim], shape=shape, negative=False)
    src = data.draw(nst.tensors(dtype=dtype, shape=shape))
    parity(lambda x, i: torch.gather(x, dim, i), x, idx, grad=True)
    parity(lambda x, i, s: torch.scatter_add(x, dim, i, s), x, idx, src, grad=True)
    parity(lambda x, i, s: x.scatter_add_(dim, i, s), x, idx, src)
    for reduce in ("sum", "prod", "amax", "amin", "mean"):
        parity(lambda x, i, s: torch.scatter_reduce(x, dim, i, s, reduce, include_self=True), x, idx, src)
    # scatter (no reduction) with duplicate indices is unspecified: one row per index.
    uniq = torch.arange(shape[dim]).reshape([-1 if d == dim else 1 for d in range(x.dim())]).expand(shape).contiguous()
    parity(lambda x, i, s: (torch.scatter(x, dim, i, s), torch.scatter(x, dim, i, 0.25)), x, uniq, src, grad=True)
    parity(lambda x, i: x.scatter_(dim, i, 1.5, reduce="add"), x, idx)


def _index_ops(dtype, data):
    x = _x(data, dtype, min_side=1)
    dim = data.draw(st.integers(0, x.dim() - 1))
    i = _idx(data, x.shape[dim], shape=(data.draw(st.integers(0, 4)),), negative=False)
    src_shape = list(x.shape)
    src_shape[dim] = i.shape[0]
    src = data.draw(nst.tensors(dtype=dtype, shape=tuple(src_shape)))
    parity(lambda x, i: torch.index_select(x, dim, i), x, i, grad=True)
    parity(lambda x, i, s: torch.index_add(x, dim, i, s, alpha=2), x, i, src, grad=True)
    parity(lambda x, i: torch.index_fill(x, dim, i, -2.0), x, i, grad=True)
    parity(lambda x, i, s: x.index_add_(dim, i, s), x, i, src)
    parity(lambda x, i: x.index_fill_(dim, i, 3.0), x, i)
    u = torch.unique(i)  # index_copy with duplicates is unspecified
    cshape = list(x.shape)
    cshape[dim] = u.shape[0]
    parity(lambda x, i, s: torch.index_copy(x, dim, i, s), x, u,
           data.draw(nst.tensors(dtype=dtype, shape=tuple(cshape))), grad=True)


def _take_put(dtype, data):
    x = _x(data, dtype, min_side=1)
    i = _idx(data, x.numel(), shape=(3,), negative=False)
    parity(lambda x, i: (torch.take(x, i), torch.take_along_dim(x.flatten(), i)), x, i, grad=True)
    parity(lambda x, i, v: x.put_(i, v, accumulate=True), x, i, data.draw(nst.tensors(dtype=dtype, shape=(3,))))


def _scatter_views(dtype, data):
    x = _x(data, dtype, shape=(4, 5))
    parity(lambda x, r, c, d: (torch.select_scatter(x, r, 0, 1), torch.slice_scatter(x, c, 1, 1, 3),
                               torch.diagonal_scatter(x, d)),
           x, data.draw(nst.tensors(dtype=dtype, shape=(5,))), data.draw(nst.tensors(dtype=dtype, shape=(4, 2))),
           data.draw(nst.tensors(dtype=dtype, shape=(4,))), grad=True)


def _setitem(dtype, data):
    x = _x(data, dtype, shape=(4, 5))
    v = data.draw(nst.tensors(dtype=dtype, shape=(2, 5)))

    def f(x, v):
        x[1:3] = v
        x[:, 0] = 7.0
        x[[0, 3], 1] += 1.0
        return x
    parity(f, x, v)


CASES: list[Case] = []
CASES += cases("index", (F32, BF16, torch.int32), _index)
CASES += cases("index_put", F32_BF16, _index_put)
CASES += cases("masked", F32_BF16, _bool_mask)
CASES += cases("gather_scatter", (F32, BF16), _gather_scatter)
CASES += cases("index_ops", (F32, BF16), _index_ops)
CASES += cases("take_put", (F32,), _take_put)
CASES += cases("scatter_views", (F32,), _scatter_views)
CASES += cases("setitem", F32_BF16, _setitem)
CASES += cases("nonzero", (F32, torch.bool, torch.int32), lambda dtype, data: parity(
    lambda x: (torch.nonzero(x), torch.nonzero(x, as_tuple=True), torch.argwhere(x), torch.where(x != 0)),
    data.draw(nst.tensors(dtype=dtype, shape=nst.shapes(0, 3, 0, 4), low=-1 if dtype != torch.bool else None,
                          high=1 if dtype != torch.bool else None))))
CASES += cases("searchsorted", (F32, torch.int32), lambda dtype, data: parity(
    lambda s, v: (torch.searchsorted(s, v), torch.searchsorted(s, v, right=True), torch.bucketize(v, s)),
    torch.sort(_x(data, dtype, shape=(6,)))[0], _x(data, dtype, shape=(2, 3))))


@pytest.mark.parametrize("case", CASES, ids=str)
@parity_settings
@given(data=st.data())
def test_indexing(case, data):
    case(data)
