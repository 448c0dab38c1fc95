"""Hypothesis strategies for op-parity tests on `neuron`.

Tensors are drawn as CPU tensors: `assert_parity` mirrors each one onto the
device with the same sizes, strides and storage offset, so a layout drawn
here reaches the neuron kernel exactly as it reaches the CPU kernel.

Values come from a seeded torch generator (drawing the seed, not every
element, keeps examples cheap and shrinking meaningful: hypothesis shrinks
shapes and layouts, the values follow).
"""
from __future__ import annotations

from typing import Sequence

import torch
from hypothesis import strategies as st

from ..execution.dtype_policy import WIDE

# The dtypes TorchNeuron computes in (the ones its type converters know).
FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.uint8)
# Stored at full width on neuron, computed in 32 bits by native ops (docs/semantics.md).
WIDE_DTYPES = WIDE  # the 64-bit rule's dtypes (execution/dtype_policy.py)
ALL_DTYPES = FLOAT_DTYPES + INT_DTYPES + WIDE_DTYPES + (torch.bool,)

LAYOUTS = ("contiguous", "transposed", "strided", "expanded", "channels_last", "offset")

# int64 values stay in int32 range: native ops compute int64 in int32 on
# Trainium (the 64-bit rule), so wider values would test the rule, not the op.
_INT_RANGE = {
    torch.uint8: (0, 32), torch.int8: (-16, 16), torch.int16: (-100, 100),
    torch.int32: (-1000, 1000), torch.int64: (-1000, 1000),
}


def dtypes(floating: bool = True, integral: bool = False, boolean: bool = False,
           wide: bool = False, half: bool = True) -> st.SearchStrategy[torch.dtype]:
    """Device dtypes. `wide` adds float64/int64 (subject to the 64-bit rule);
    `half=False` leaves out float16 and bfloat16."""
    choices: list[torch.dtype] = []
    if floating:
        choices += [torch.float32] + ([torch.bfloat16, torch.float16] if half else [])
        choices += [torch.float64] if wide else []
    if integral:
        choices += list(INT_DTYPES) + ([torch.int64] if wide else [])
    if boolean:
        choices.append(torch.bool)
    if not choices:
        raise ValueError("dtypes(): every family is excluded")
    return st.sampled_from(choices)


def shapes(min_dims: int = 0, max_dims: int = 4, min_side: int = 0, max_side: int = 5) -> st.SearchStrategy[tuple]:
    """Shapes including 0-dim (min_dims=0) and empty (a side of 0 when min_side=0)."""
    return st.lists(st.integers(min_side, max_side), min_size=min_dims, max_size=max_dims).map(tuple)


def broadcastable_shapes(shape: Sequence[int], max_extra_dims: int = 1) -> st.SearchStrategy[tuple]:
    """Shapes that broadcast against `shape`: some dims set to 1, some dropped
    from the front, some new leading dims."""
    @st.composite
    def draw(draw):
        dims = [draw(st.sampled_from([d, 1])) for d in shape]
        drop = draw(st.integers(0, len(dims)))
        dims = dims[drop:]
        extra = draw(st.lists(st.integers(1, 3), max_size=max_extra_dims if drop == 0 else 0))
        return tuple(extra + dims)
    return draw()


def values(t: torch.Tensor, seed: int, low: float | None = None, high: float | None = None) -> torch.Tensor:
    """Fills `t` in place from a seeded generator, in a range suited to its dtype."""
    g = torch.Generator().manual_seed(seed)
    if t.dtype == torch.bool:
        t.copy_(torch.randint(0, 2, t.shape, generator=g).bool())
    elif t.dtype.is_floating_point:
        x = torch.randn(t.shape, generator=g, dtype=torch.float64)
        if low is not None or high is not None:
            lo = -3.0 if low is None else low
            hi = 3.0 if high is None else high
            x = torch.rand(t.shape, generator=g, dtype=torch.float64) * (hi - lo) + lo
        # float64 values are drawn float32-representable: the 64-bit rule
        # rounds float64 inputs to float32 on native ops, and full-width
        # values would test that rounding rather than the op.
        t.copy_(x.float() if t.dtype == torch.float64 else x)
    else:
        lo, hi = _INT_RANGE.get(t.dtype, (-100, 100))
        lo = lo if low is None else int(low)
        hi = hi if high is None else int(high)
        t.copy_(torch.randint(lo, hi + 1, t.shape, generator=g))
    return t


def _layout_view(draw, shape: tuple, dtype: torch.dtype, layout: str) -> torch.Tensor:
    """An uninitialised CPU tensor of `shape` whose memory is laid out as `layout`."""
    n = len(shape)
    if layout == "transposed" and n >= 2:
        perm = draw(st.permutations(range(n)).filter(lambda p: list(p) != sorted(p)))
        base = torch.empty([shape[p] for p in perm], dtype=dtype)
        inverse = [perm.index(i) for i in range(n)]
        return base.permute(inverse)
    if layout == "strided" and n >= 1:
        steps = [draw(st.integers(1, 3)) for _ in shape]
        base = torch.empty([max(s * k, 1) for s, k in zip(shape, steps)], dtype=dtype)
        return base[tuple(slice(0, s * k, k) for s, k in zip(shape, steps))]
    if layout == "expanded" and n >= 1:
        # Stride 0 in some dims: one element stands for a whole dim.
        stride0 = [draw(st.booleans()) for _ in shape]
        base = torch.empty([1 if z else s for s, z in zip(shape, stride0)], dtype=dtype)
        return base.expand(shape)
    if layout == "channels_last" and n in (4, 5):
        fmt = torch.channels_last if n == 4 else torch.channels_last_3d
        return torch.empty(shape, dtype=dtype).contiguous(memory_format=fmt)
    if layout == "offset":
        numel = 1
        for s in shape:
            numel *= s
        pad = draw(st.integers(1, 7))
        return torch.empty(numel + pad, dtype=dtype)[pad:].view(shape)
    return torch.empty(shape, dtype=dtype)


@st.composite
def tensors(draw, dtype: torch.dtype | st.SearchStrategy | None = None,
            shape: Sequence[int] | st.SearchStrategy | None = None,
            layouts: Sequence[str] = LAYOUTS, low: float | None = None, high: float | None = None,
            special: bool = False) -> torch.Tensor:
    """A CPU tensor of `dtype` and `shape` (values or strategies; defaults:
    float dtypes and `shapes()`), laid out as one of `layouts`. `low`/`high`
    bound the values; `special=True` sprinkles inf, -inf, nan and -0.0 into
    floating tensors."""
    if dtype is None:
        dtype = dtypes()
    if isinstance(dtype, st.SearchStrategy):
        dtype = draw(dtype)
    if shape is None:
        shape = shapes()
    if isinstance(shape, st.SearchStrategy):
        shape = draw(shape)
    shape = tuple(shape)
    layout = draw(st.sampled_from(list(layouts)))
    t = _layout_view(draw, shape, dtype, layout)
    seed = draw(st.integers(0, 2**31 - 1))
    # Fill the whole storage, so bytes outside the view are defined too.
    storage = torch.empty(0, dtype=dtype).set_(t.untyped_storage(), 0,
                                               (t.untyped_storage().nbytes() // t.element_size(),), (1,))
    values(storage, seed, low, high)
    if special and dtype.is_floating_point and storage.numel():
        g = torch.Generator().manual_seed(seed + 1)
        idx = torch.randint(0, storage.numel(), (max(1, storage.numel() // 8),), generator=g)
        pick = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0], dtype=dtype)
        storage[idx] = pick[torch.randint(0, 4, idx.shape, generator=g)]
    return t


def index_tensors(size: int, shape: Sequence[int] | st.SearchStrategy | None = None,
                  dtype: torch.dtype = torch.int64, negative: bool = True) -> st.SearchStrategy[torch.Tensor]:
    """Valid indices into a dim of `size` (negative ones too when allowed)."""
    lo = -size if negative else 0
    return tensors(dtype=dtype, shape=shape if shape is not None else shapes(1, 2, 0, 4),
                   layouts=("contiguous", "strided", "offset"), low=lo, high=max(size - 1, lo))
