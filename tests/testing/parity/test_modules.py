"""Module parity: each module runs forward and backward on CPU and on
neuron from the same weights; outputs, input gradients, parameter gradients
and buffers (running stats) must agree. Also RNN/LSTM/GRU."""
import pytest
import torch
from torch import nn
from hypothesis import given, strategies as st

from _cases import BF16, F32, F32_BF16, Case, cases, parity, parity_settings
from torch_neuron_sim import torch_versions
from torch_neuron_sim.testing import strategies as nst


# Normalisation layers get no expanded inputs: a channel of equal values has
# zero variance, and its output is rounding noise scaled by 1/sqrt(eps).
NON_CONSTANT = tuple(layout for layout in nst.LAYOUTS if layout != "expanded")


def _module(make, input_shape, dtype, data, train=True, layouts=nst.LAYOUTS, **kw):
    torch.manual_seed(data.draw(st.integers(0, 2**16), label="weights seed"))
    m = make().to(dtype)
    m.train(train)
    x = data.draw(nst.tensors(dtype=dtype, shape=input_shape(data) if callable(input_shape) else input_shape,
                              layouts=layouts))
    parity(m, x, grad=True, **kw)


def _batch(data):
    return data.draw(st.integers(1, 3), label="batch")


def _seq(data):
    return data.draw(st.integers(1, 4), label="seq")


# bf16 with a training-mode norm: the statistics cancel O(1) terms and CPU's
# kernel rounds at different points for a compact copy (what the fallback
# passes) than for a strided input (see test_nn). Against float64 each side
# is within ~4 bf16 ulps at 1.0, so they may differ by 8.
NORM_BF16 = dict(rtol=1.6e-2, atol=6.4e-2)

MODULES = {
    "Linear": (lambda: nn.Linear(5, 3), lambda d: (_batch(d), 5), {}),
    "Conv1d": (lambda: nn.Conv1d(2, 3, 3, padding=1), lambda d: (_batch(d), 2, 6), {}),
    "Conv2d": (lambda: nn.Conv2d(2, 4, 3, stride=2, groups=2), lambda d: (_batch(d), 2, 5, 5), {}),
    "Conv3d": (lambda: nn.Conv3d(2, 2, 2), lambda d: (_batch(d), 2, 3, 3, 3), {}),
    "ConvTranspose2d": (lambda: nn.ConvTranspose2d(2, 3, 3, stride=2), lambda d: (_batch(d), 2, 3, 3), {}),
    "BatchNorm1d": (lambda: nn.BatchNorm1d(3), lambda d: (_batch(d) + 1, 3, 4), {BF16: NORM_BF16}),
    "BatchNorm2d": (lambda: nn.BatchNorm2d(3), lambda d: (_batch(d) + 1, 3, 2, 3), {BF16: NORM_BF16}),
    "LayerNorm": (lambda: nn.LayerNorm(6), lambda d: (_batch(d), 3, 6), {}),
    "GroupNorm": (lambda: nn.GroupNorm(2, 4), lambda d: (_batch(d), 4, 3), {BF16: dict(rtol=1.6e-2, atol=6.4e-2)}),
    "Embedding": (None, None, {}),
    "MultiheadAttention": (None, None, {}),
    "TransformerEncoderLayer": (None, None, {}),
    "LSTM": (None, None, {}),
    "GRU": (None, None, {}),
    "RNN": (None, None, {}),
}


def _simple(name):
    make, shape, tols = MODULES[name]
    layouts = NON_CONSTANT if "Norm" in name else nst.LAYOUTS
    if name == "GroupNorm" and not torch_versions.current().group_norm_copies_input:
        # PyTorch 2.14's group_norm passes a non-contiguous (transposed, strided) input to
        # math_group_norm, whose view() rejects it on neuron (torch_versions.py; docs/testing.md).
        layouts = ("contiguous", "offset")
    return lambda dtype, data: _module(make, shape, dtype, data, layouts=layouts, **tols.get(dtype, {}))


def _embedding(dtype, data):
    torch.manual_seed(data.draw(st.integers(0, 2**16), label="weights seed"))
    m = nn.Embedding(7, 4, padding_idx=0).to(dtype)
    idx = data.draw(nst.index_tensors(7, shape=(_batch(data), 3), negative=False))
    parity(m, idx, grad=True)


def _mha(dtype, data):
    torch.manual_seed(data.draw(st.integers(0, 2**16), label="weights seed"))
    m = nn.MultiheadAttention(8, 2, batch_first=True).to(dtype)
    b, s = _batch(data), _seq(data)
    q = data.draw(nst.tensors(dtype=dtype, shape=(b, s, 8)))
    kv = data.draw(nst.tensors(dtype=dtype, shape=(b, s + 1, 8)))
    tol = dict(rtol=1.6e-2, atol=3.2e-2) if dtype == BF16 else {}  # fused attention, see test_nn.SDPA_TOL
    parity(lambda m, q, kv: m(q, kv, kv), m, q, kv, grad=True, **tol)
    m.eval()  # eval without grad takes the fused _native_multi_head_attention path
    with torch.no_grad():
        # need_weights=False, as on Trainium: the device's fused kernel refuses to
        # return attention weights (test_device_messages checks that message), and
        # returns an empty tensor where the CPU returns None: the output is compared.
        parity(lambda m, q: m(q, q, q, need_weights=False)[0], m, q, **tol)


def _encoder(dtype, data):
    torch.manual_seed(data.draw(st.integers(0, 2**16), label="weights seed"))
    # bf16 uses gelu: ReLU's gradient jumps at 0, so one bf16 ulp of difference
    # in a pre-activation near 0 switches a whole term of linear1's gradient.
    activation = "gelu" if dtype == BF16 else "relu"
    m = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True,
                                   activation=activation).to(dtype)
    # No expanded inputs: a constant row has zero variance in the layer norms.
    x = data.draw(nst.tensors(dtype=dtype, shape=(_batch(data), _seq(data) + 1, 8), layouts=NON_CONSTANT))
    # bf16: the fused attention's differences (test_nn.SDPA_TOL: up to 8 bf16
    # ulps) pass through two layer norms and the feed-forward block, ~10 bf16
    # roundings deep; parameter gradients also sum them over batch and sequence.
    tol = dict(rtol=5e-2, atol=6.4e-2) if dtype == BF16 else {}
    parity(m, x, grad=True, **tol)
    causal = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
    parity(lambda m, x, mask: m(x, src_mask=mask, is_causal=True), m, x, causal, grad=True, grad_argnums=(1,), **tol)


def _rnn(kind, dtype, data):
    torch.manual_seed(data.draw(st.integers(0, 2**16), label="weights seed"))
    layers, bidir = data.draw(st.integers(1, 2)), data.draw(st.booleans())
    m = getattr(nn, kind)(4, 3, num_layers=layers, bidirectional=bidir, batch_first=True).to(dtype)
    x = data.draw(nst.tensors(dtype=dtype, shape=(_batch(data), _seq(data), 4)))
    parity(m, x, grad=True)
    cell = getattr(nn, kind + "Cell")(4, 3).to(dtype)
    parity(cell, x[:, 0], grad=True)


CASES: list[Case] = []
for name in ("Linear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose2d", "BatchNorm1d", "BatchNorm2d", "LayerNorm",
             "GroupNorm"):
    CASES += cases(name, F32_BF16, _simple(name))
CASES += cases("Embedding", F32_BF16, _embedding)
CASES += cases("MultiheadAttention", F32_BF16, _mha)
CASES += cases("TransformerEncoderLayer", F32_BF16, _encoder)
for kind in ("LSTM", "GRU", "RNN"):
    CASES += cases(kind, (F32,), lambda dtype, data, kind=kind: _rnn(kind, dtype, data))


@pytest.mark.parametrize("case", CASES, ids=str)
@parity_settings
@given(data=st.data())
def test_module(case, data):
    case(data)
