"""The legacy dialect's index tiles: nl.arange / nl.mgrid as affine index
expressions. An expression is const + sum of coef * i_k, where i_k runs over
range(size_k) on axis k of an index grid (`nl.arange(n)[None, :, None]` is
axis 1 of a rank-3 grid; `nl.mgrid[0:a, 0:b, 0:c]` gives the three axes).
Indexing a tensor with such expressions addresses
offset + sum over dimensions of stride * expression, itself an affine
function of the grid: a strided view of the tensor (what the hardware's
access patterns are), so it reads and writes like any other view. The
result has the grid's shape: `t[i_p, 2 * i_1 + i_2]` with a rank-3 grid is a
3-D view of a 2-D tile. Masks built from expressions raise, naming the
current form."""
from __future__ import annotations

import builtins
from typing import Any, Optional

from .errors import legacy
from .launch import fail


class AffineIndex:
    """const + sum(coef * i_axis); `terms` maps a grid axis to (coef, size). `rank` is the
    grid's rank once the expression is placed (`[:, None]`), None for a bare nl.arange."""

    __slots__ = ("const", "terms", "rank")

    def __init__(self, const: int, terms: dict, rank: Optional[int]) -> None:
        self.const, self.terms, self.rank = const, terms, rank

    def __getitem__(self, key: Any) -> "AffineIndex":
        """Placement on a grid: exactly one `:` among Nones (`nl.arange(8)[None, :, None]`)."""
        key = key if isinstance(key, tuple) else (key,)
        full = [i for i, k in enumerate(key) if isinstance(k, slice) and k == slice(None)]
        if self.rank is not None or len(self.terms) != 1 or len(full) != 1 \
                or any(k is not None for i, k in enumerate(key) if i != full[0]):
            raise legacy(f"placing an index expression with {key!r}",
                         "place a bare nl.arange with one ':' among Nones, e.g. nl.arange(n)[:, None]")
        (coef, size), = self.terms.values()
        return AffineIndex(self.const, {full[0]: (coef, size)}, len(key))

    # --- affine arithmetic: with ints (compile-time constants, program_id) and other expressions
    def __add__(self, other: Any) -> "AffineIndex":
        if isinstance(other, AffineIndex):
            if self.rank is None or self.rank != other.rank:
                raise legacy("adding index expressions not placed on one grid",
                             "place each nl.arange on the same grid rank, e.g. nl.arange(a)[:, None] + "
                             "nl.arange(b)[None, :]")
            terms = dict(self.terms)
            for axis, (coef, size) in other.terms.items():
                if axis in terms:
                    c, s = terms[axis]
                    if s != size:
                        raise fail("index", f"grid axis {axis} has size {s} in one expression and {size} in the other")
                    terms[axis] = (c + coef, size)
                else:
                    terms[axis] = (coef, size)
            return AffineIndex(self.const + other.const, terms, self.rank)
        return AffineIndex(self.const + _constant(other), self.terms, self.rank)

    __radd__ = __add__

    def __mul__(self, k: Any) -> "AffineIndex":
        k = _constant(k)
        return AffineIndex(self.const * k, {a: (c * k, s) for a, (c, s) in self.terms.items()}, self.rank)

    __rmul__ = __mul__

    def __neg__(self) -> "AffineIndex":
        return self * -1

    def __sub__(self, other: Any) -> "AffineIndex":
        return self + (-other if isinstance(other, AffineIndex) else -_constant(other))

    def __rsub__(self, other: Any) -> "AffineIndex":
        return -self + other

    def _not_affine(self, *a: Any) -> Any:
        raise legacy("dividing or taking the remainder of an index expression", "index with affine expressions "
                     "(sums of nl.arange terms times ints, plus ints)")

    __floordiv__ = __truediv__ = __mod__ = __rfloordiv__ = __rmod__ = _not_affine

    def _mask(self, *a: Any) -> Any:
        raise legacy("a mask built from nl.arange (e.g. i_p < n)", "slice to the valid part: t[0:n]")
    __lt__ = __le__ = __gt__ = __ge__ = _mask

    def bounds(self) -> tuple:
        """The least and the greatest value over the grid."""
        lo = hi = self.const
        for coef, size in self.terms.values():
            reach = coef * (size - 1)
            lo, hi = lo + min(0, reach), hi + max(0, reach)
        return lo, hi

    def simple(self) -> bool:
        """One term with a positive coefficient: the expression is a strided range (a slice)."""
        return len(self.terms) == 1 and next(iter(self.terms.values()))[0] > 0

    def as_slice(self) -> slice:
        (step, size), = self.terms.values()
        return slice(self.const, self.const + step * (size - 1) + 1, step)


def _constant(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int):
        if hasattr(k, "__index__") and not isinstance(k, bool):
            return int(k)
        raise legacy(f"an index expression combined with {type(k).__name__} {k!r}",
                     "combine nl.arange only with Python ints (shapes, loop variables, program_id)")
    return k


def arange(*args: int) -> AffineIndex:
    r = builtins.range(*args)
    return AffineIndex(r.start, {0: (r.step, len(r))}, None)


class _MGrid:
    """nl.mgrid[0:a, 0:b, ...]: one expression per axis of a grid of that rank."""

    def __getitem__(self, key: Any) -> Any:
        key = key if isinstance(key, tuple) else (key,)
        n = len(key)
        out = []
        for i, k in enumerate(key):
            if not isinstance(k, slice):
                raise legacy("nl.mgrid with a non-slice", "use slices, e.g. nl.mgrid[0:128, 0:512]")
            r = builtins.range(k.start or 0, k.stop, k.step or 1)
            out.append(AffineIndex(r.start, {i if n > 1 else 0: (r.step, len(r))}, n if n > 1 else None))
        return tuple(out) if n > 1 else out[0]


mgrid = _MGrid()


def affine_to_slices(parts: tuple, ndim: int) -> tuple:
    """The index with each expression as a slice: for expressions each naming a range of
    their own dimension, mixed with slices (`t[i_p, 0:512]`, a bare `nl.arange(n)`)."""
    out = []
    for i, p in enumerate(parts):
        if isinstance(p, AffineIndex):
            pos = next(iter(p.terms)) if p.rank is not None and len(p.terms) == 1 else None
            if not p.simple() or (p.rank is not None and pos != i and not (pos == p.rank - 1 and i == ndim - 1)):
                raise legacy("an index expression mixed with slices that is not a range of its own dimension",
                             "index every dimension with an expression on one grid, or use slices")
            out.append(p.as_slice())
        else:
            out.append(p)
    return tuple(out)


def grid_view(t: Any, parts: tuple, name: str, instruction: str) -> Optional[tuple]:
    """(shape, strides, storage offset) of t indexed by ints and expressions placed on one
    grid (dimensions left unindexed follow the grid's axes); None when `parts` has
    slices, `...`, None or bare aranges (affine_to_slices handles those). An index outside
    the tensor raises, naming the dimension and the range the expression reaches."""
    rank = None
    for p in parts:
        if isinstance(p, AffineIndex):
            if p.rank is None:
                return None
            if rank is not None and p.rank != rank:
                raise fail(instruction, f"tensor '{name}' indexed by expressions on grids of rank {rank} and "
                           f"{p.rank}", "place every nl.arange of one index on a grid of the same rank")
            rank = p.rank
        elif isinstance(p, bool) or not isinstance(p, int):
            return None
    if len(parts) > t.dim():
        raise fail(instruction, f"{len(parts)} indices for tensor '{name}' of {t.dim()} dimensions {tuple(t.shape)}")
    sizes, strides = [1] * rank, [0] * rank
    offset = t.storage_offset()
    for d, p in enumerate(parts):
        stride, size = t.stride(d), t.shape[d]
        lo, hi = p.bounds() if isinstance(p, AffineIndex) else (p, p)
        if lo < 0 or hi >= size:
            raise fail(instruction, f"index reaching [{lo}, {hi}] out of bounds on dimension {d} of tensor '{name}' "
                       f"with shape {tuple(t.shape)}")
        if not isinstance(p, AffineIndex):
            offset += p * stride
            continue
        offset += p.const * stride
        for axis, (coef, n) in p.terms.items():
            if sizes[axis] not in (1, n):
                raise fail(instruction, f"grid axis {axis} has size {sizes[axis]} in one index and {n} in another")
            sizes[axis] = n
            strides[axis] += coef * stride
    if any(s < 0 for s in strides):
        raise fail(instruction, f"an index of tensor '{name}' decreases along a grid axis, which no access pattern "
                   "of the simulator walks", "index with increasing expressions")
    shape = sizes + list(t.shape[len(parts):])
    strides += list(t.stride()[len(parts):])
    return tuple(shape), tuple(strides), offset


def access_pattern(x: Any, pattern: Any, offset: int = 0, **kwargs: Any) -> Any:
    """NkiTensor.ap(pattern, offset): a hardware access pattern as a view. `pattern` is
    [[stride, count], ...], the partitions' pair first; strides and offset count elements of
    the tensor laid out row-major (AWS's tutorials reduce pooling windows this way)."""
    t = x.t
    try:
        pairs = [(int(s), int(n)) for s, n in pattern]
    except (TypeError, ValueError):
        raise fail("ap", f"pattern {pattern!r} of tensor '{x.name}' is not a list of [stride, count] pairs") from None
    if not t.is_contiguous():
        raise fail("ap", f"tensor '{x.name}' is a strided view", "take the access pattern of a whole tensor")
    if not pairs or any(n <= 0 or s < 0 for s, n in pairs):
        raise fail("ap", f"pattern {pattern!r} of tensor '{x.name}': counts must be positive, strides not negative")
    last = offset + sum(s * (n - 1) for s, n in pairs)
    if offset < 0 or last >= t.numel():
        raise fail("ap", f"pattern {pattern!r} at offset {offset} reaches element {last} of tensor '{x.name}', "
                   f"which has {t.numel()}")
    shape, strides = [n for _, n in pairs], [s for s, _ in pairs]
    aux = x.aux.as_strided(shape, strides, x.aux.storage_offset() + offset) if x.aux is not None else None
    return type(x)(t.as_strided(shape, strides, t.storage_offset() + offset), x.alloc, aux, x.oob)
