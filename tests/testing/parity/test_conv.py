"""Convolutions 1d-3d and transposed, with stride, padding, dilation and
groups; pooling, padding modes, upsampling and unfold/fold."""
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, strategies as st

from _cases import BF16, F32, F32_BF16, Case, cases, parity, parity_settings
from torch_neuron_sim.testing import strategies as nst

IMG = ("contiguous", "channels_last", "strided", "offset", "transposed")


@st.composite
def _conv_args(draw, nd, dtype, transposed):
    groups = draw(st.sampled_from([1, 2]))
    cin, cout = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
    k = draw(st.integers(1, 3))
    stride, dilation = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    # Transposed convs need (size-1)*stride - 2*padding + dilation*(k-1) + 1 > 0.
    padding = draw(st.integers(0, 1 if not transposed or dilation * (k - 1) >= 2 else 0))
    size = draw(st.integers((k - 1) * dilation + 1, 6))
    x = draw(nst.tensors(dtype=dtype, shape=(draw(st.integers(1, 2)), cin) + (size,) * nd, layouts=IMG))
    wshape = (cin, cout // groups) if transposed else (cout, cin // groups)
    w = draw(nst.tensors(dtype=dtype, shape=wshape + (k,) * nd, layouts=IMG))
    b = draw(nst.tensors(dtype=dtype, shape=(cout,))) if draw(st.booleans()) else None
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    if transposed:
        kw["output_padding"] = draw(st.integers(0, max(stride, dilation) - 1))
    return x, w, b, kw


def _conv_case(nd, transposed):
    fn = {(1, False): F.conv1d, (2, False): F.conv2d, (3, False): F.conv3d,
          (1, True): F.conv_transpose1d, (2, True): F.conv_transpose2d, (3, True): F.conv_transpose3d}[(nd, transposed)]

    def check(dtype, data):
        x, w, b, kw = data.draw(_conv_args(nd, dtype, transposed))
        parity(lambda x, w, b: fn(x, w, b, **kw), x, w, b, grad=True)
    return cases(f"conv{'_transpose' if transposed else ''}{nd}d", F32_BF16, check)


def _img(data, dtype, nd, c=2, size=(2, 6)):
    return data.draw(nst.tensors(dtype=dtype, shape=(2, c) + (data.draw(st.integers(*size)),) * nd, layouts=IMG))


CASES: list[Case] = []
for nd in (1, 2, 3):
    CASES += _conv_case(nd, False) + _conv_case(nd, True)
CASES += cases("max_pool2d", F32_BF16, lambda dtype, data, stride=st.integers(1, 2): parity(
    lambda x, s=data.draw(stride): F.max_pool2d(x, 2, stride=s, padding=1, return_indices=True),
    _img(data, dtype, 2), grad=True))
CASES += cases("max_pool1d_3d", (F32,), lambda dtype, data: parity(
    lambda a, b: (F.max_pool1d(a, 2), F.max_pool3d(b, 2)), _img(data, dtype, 1), _img(data, dtype, 3), grad=True))
CASES += cases("avg_pool", F32_BF16, lambda dtype, data: parity(
    lambda a, b: (F.avg_pool1d(a, 2), F.avg_pool2d(b, 2, padding=1, count_include_pad=False)),
    _img(data, dtype, 1), _img(data, dtype, 2), grad=True))
CASES += cases("avg_pool3d", (F32,), lambda dtype, data: parity(  # CPU has no bf16 avg_pool3d
    lambda c: F.avg_pool3d(c, 2), _img(data, dtype, 3), grad=True))
CASES += cases("adaptive_pool", F32_BF16, lambda dtype, data: parity(
    lambda x: (F.adaptive_avg_pool2d(x, (2, 3)), F.adaptive_max_pool2d(x, 2), F.adaptive_avg_pool1d(x.flatten(2), 3)),
    _img(data, dtype, 2), grad=True))
CASES += cases("lp_pool", (F32,), lambda dtype, data: parity(
    lambda x: F.lp_pool2d(x, 2, 2), _img(data, dtype, 2).abs() + 0.1, grad=True))
CASES += cases("pad_modes", F32_BF16, lambda dtype, data: parity(
    lambda x: (F.pad(x, (1, 2, 0, 1)), F.pad(x, (1, 1, 1, 1), mode="reflect"), F.pad(x, (1, 1, 2, 0), mode="replicate"),
               F.pad(x, (1, 1, 1, 1), mode="circular")), _img(data, dtype, 2, size=(3, 6)), grad=True))
CASES += cases("pad_1d_3d", (F32,), lambda dtype, data: parity(
    lambda a, b: (F.pad(a, (1, 1), mode="reflect"), F.pad(a, (2, 1), mode="replicate"),
                  F.pad(b, (1, 1, 1, 1, 1, 1), mode="replicate"), F.pad(b, (1, 1, 1, 1, 1, 1), mode="reflect")),
    _img(data, dtype, 1, size=(3, 6)), _img(data, dtype, 3, size=(3, 4)), grad=True))
CASES += cases("upsample", F32_BF16, lambda dtype, data: parity(
    lambda x: (F.interpolate(x, scale_factor=2, mode="nearest"), F.interpolate(x, size=(5, 3), mode="bilinear"),
               F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=True)), _img(data, dtype, 2), grad=True))
CASES += cases("upsample_1d_3d", (F32,), lambda dtype, data: parity(
    lambda a, b: (F.interpolate(a, scale_factor=2, mode="linear"), F.interpolate(b, scale_factor=2, mode="trilinear"),
                  F.interpolate(b, scale_factor=2, mode="nearest")),
    _img(data, dtype, 1), _img(data, dtype, 3, size=(2, 3)), grad=True))
CASES += cases("pixel_shuffle", (F32,), lambda dtype, data: parity(
    lambda x: (F.pixel_shuffle(x, 2), F.pixel_unshuffle(F.pixel_shuffle(x, 2), 2)), _img(data, dtype, 2, c=4),
    grad=True))
CASES += cases("unfold_fold", (F32,), lambda dtype, data: parity(
    lambda x: F.fold(F.unfold(x, 2, padding=1), (x.shape[-1], x.shape[-1]), 2, padding=1),
    _img(data, dtype, 2), grad=True))
CASES += cases("grid_sample", (F32,), lambda dtype, data: parity(
    lambda x, g: F.grid_sample(x, g, align_corners=False), _img(data, dtype, 2, size=(3, 5)),
    data.draw(nst.tensors(dtype=dtype, shape=(2, 3, 3, 2), low=-1, high=1)), grad=True))
CASES += cases("affine_grid", (F32,), lambda dtype, data: parity(
    lambda t: F.affine_grid(t, (2, 1, 3, 4), align_corners=False),
    data.draw(nst.tensors(dtype=dtype, shape=(2, 2, 3))), grad=True))


@pytest.mark.parametrize("case", CASES, ids=str)
@parity_settings
@given(data=st.data())
def test_conv(case, data):
    case(data)
