"""Matrix products and linear algebra: mm, bmm, addmm, matmul's broadcasting,
baddbmm, einsum, and the decompositions TorchNeuron leaves on the CPU."""
import pytest
import torch
from hypothesis import given, strategies as st

from _cases import BF16, F16, F32, F32_BF16, F32_BF16_F16, Case, cases, parity, parity_settings
from torch_neuron_sim.testing import strategies as nst
from torch_neuron_sim.testing.parity import tolerance

L2 = ("contiguous", "transposed", "strided", "expanded", "offset")
dim = st.integers(1, 6)


def _t(data, dtype, shape, layouts=L2, **kw):
    return data.draw(nst.tensors(dtype=dtype, shape=shape, layouts=layouts, **kw))


def _mm(dtype, data):
    n, k, m = data.draw(dim), data.draw(dim), data.draw(dim)
    parity(torch.mm, _t(data, dtype, (n, k)), _t(data, dtype, (k, m)), grad=True)


def _bmm(dtype, data):
    b, n, k, m = data.draw(st.integers(0, 3)), data.draw(dim), data.draw(dim), data.draw(dim)
    parity(torch.bmm, _t(data, dtype, (b, n, k)), _t(data, dtype, (b, k, m)), grad=True)


def _addmm(dtype, data):
    n, k, m = data.draw(dim), data.draw(dim), data.draw(dim)
    bias_shape = data.draw(st.sampled_from([(n, m), (m,), (1, m)]))
    parity(lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0), _t(data, dtype, bias_shape),
           _t(data, dtype, (n, k)), _t(data, dtype, (k, m)), grad=True)


def _matmul(dtype, data):
    # 1-D, 2-D and batched operands with broadcasting batch dims.
    k = data.draw(dim)
    left = data.draw(st.sampled_from([(k,), (3, k), (2, 3, k), (1, 3, k)]))
    right = data.draw(st.sampled_from([(k,), (k, 4), (2, k, 4), (1, k, 4)]))
    parity(torch.matmul, _t(data, dtype, left), _t(data, dtype, right), grad=True)


CASES: list[Case] = []
CASES += cases("mm", F32_BF16_F16, _mm)
CASES += cases("bmm", F32_BF16_F16, _bmm)
CASES += cases("addmm", F32_BF16, _addmm)
CASES += cases("matmul", F32_BF16, _matmul)
CASES += cases("mv", F32_BF16, lambda dtype, data: parity(torch.mv, _t(data, dtype, (3, 4)), _t(data, dtype, (4,)),
                                                          grad=True))
CASES += cases("addmv", F32_BF16, lambda dtype, data: parity(
    torch.addmv, _t(data, dtype, (3,)), _t(data, dtype, (3, 4)), _t(data, dtype, (4,)), grad=True))
CASES += cases("dot", F32_BF16, lambda dtype, data: parity(torch.dot, _t(data, dtype, (5,)), _t(data, dtype, (5,)),
                                                           grad=True))
CASES += cases("vdot", (F32,), lambda dtype, data: parity(torch.vdot, _t(data, dtype, (5,)), _t(data, dtype, (5,))))
CASES += cases("baddbmm", F32_BF16, lambda dtype, data: parity(
    lambda c, a, b: torch.baddbmm(c, a, b, beta=0.5), _t(data, dtype, (2, 3, 5)), _t(data, dtype, (2, 3, 4)),
    _t(data, dtype, (2, 4, 5)), grad=True))
CASES += cases("addbmm", (F32,), lambda dtype, data: parity(
    torch.addbmm, _t(data, dtype, (3, 5)), _t(data, dtype, (2, 3, 4)), _t(data, dtype, (2, 4, 5)), grad=True))
CASES += cases("addr", (F32,), lambda dtype, data: parity(
    torch.addr, _t(data, dtype, (3, 4)), _t(data, dtype, (3,)), _t(data, dtype, (4,)), grad=True))
CASES += cases("outer_kron", (F32,), lambda dtype, data: parity(
    lambda a, b: (torch.outer(a, b), torch.kron(a, b)), _t(data, dtype, (3,)), _t(data, dtype, (4,)), grad=True))
CASES += cases("einsum", F32_BF16, lambda dtype, data: parity(
    lambda a, b: torch.einsum("bij,bjk->bik", a, b), _t(data, dtype, (2, 3, 4)), _t(data, dtype, (2, 4, 5)),
    grad=True))
CASES += cases("tensordot", (F32,), lambda dtype, data: parity(
    lambda a, b: torch.tensordot(a, b, dims=([1, 2], [0, 1])), _t(data, dtype, (2, 3, 4)),
    _t(data, dtype, (3, 4, 5)), grad=True))
# linear is one device op; the CPU's linear rounds differently by input layout
# (addmm with the bias fused for a contiguous input, matmul then add otherwise),
# and a neuron copy of a gapped CPU tensor is contiguous: one half-precision
# rounding of the bias add may differ: half-precision outputs get the tolerance
# their gradients have (parity's default for grads, a few roundings).
CASES += cases("linear", F32_BF16_F16, lambda dtype, data: parity(
    torch.nn.functional.linear, _t(data, dtype, (2, 3, 4)), _t(data, dtype, (5, 4)), _t(data, dtype, (5,)),
    grad=True, **(dict(zip(("rtol", "atol"), tolerance(dtype, grad=True))) if dtype in (F16, BF16) else {})))
CASES += cases("cross", (F32,), lambda dtype, data: parity(
    lambda a, b: torch.linalg.cross(a, b), _t(data, dtype, (4, 3)), _t(data, dtype, (4, 3)), grad=True))
CASES += cases("tril_triu", F32_BF16, lambda dtype, data: parity(
    lambda a: (torch.tril(a, -1), torch.triu(a, 1)), _t(data, dtype, (data.draw(dim), data.draw(dim))), grad=True))
CASES += cases("diag", (F32,), lambda dtype, data: parity(
    lambda a, v: (torch.diag(a), torch.diag(v), torch.diag_embed(a), torch.diagonal(a).clone()),
    _t(data, dtype, (4, 4)), _t(data, dtype, (3,)), grad=True))


def _spd(dtype, data):  # well-conditioned matrices: decompositions stay stable
    a = _t(data, dtype, (3, 3), layouts=("contiguous", "transposed"))
    return a @ a.mT + 3 * torch.eye(3, dtype=dtype)


# TorchNeuron keeps linear algebra decompositions on the CPU: none of them is in its native set.
CASES += cases("inv_det", (F32,), lambda dtype, data: parity(
    lambda a: (torch.linalg.inv(a), torch.linalg.det(a), torch.linalg.slogdet(a)), _spd(dtype, data), grad=True,
    rtol=1e-4, atol=1e-5))  # matrix inversion amplifies fp32 rounding by the condition number (< 10 here)
CASES += cases("cholesky_solve", (F32,), lambda dtype, data: parity(
    lambda a, b: (torch.linalg.cholesky(a), torch.linalg.solve(a, b)), _spd(dtype, data), _t(data, dtype, (3, 2)),
    grad=True, rtol=1e-4, atol=1e-5))  # as above: conditioning of the solve
CASES += cases("qr_eigh", (F32,), lambda dtype, data: parity(
    lambda a: (torch.linalg.qr(a), torch.linalg.eigvalsh(a)), _spd(dtype, data), rtol=1e-4, atol=1e-5))
CASES += cases("triangular_solve", (F32,), lambda dtype, data: parity(
    lambda a, b: torch.linalg.solve_triangular(a, b, upper=False), torch.tril(_spd(dtype, data)),
    _t(data, dtype, (3, 2)), grad=True, rtol=1e-4, atol=1e-5))


@pytest.mark.parametrize("case", CASES, ids=str)
@parity_settings
@given(data=st.data())
def test_linalg(case, data):
    case(data)
