"""The legacy dialect's index tiles: nl.arange / nl.mgrid as affine ranges.
Only the affine forms that name a rectangular block are supported (they
become slices); masks built from them raise, naming the current form."""
from __future__ import annotations

import builtins
from typing import Any, Optional

from .errors import legacy

class AffineIndex:
    """start + step * arange(size), placed on one dimension of an index
    expression (legacy `nl.arange(128)[:, None]`). Only the affine forms that
    name a rectangular block are supported; they become slices."""

    def __init__(self, start: int, size: int, step: int = 1, pos: Optional[int] = None) -> None:
        self.start, self.size, self.step, self.pos = start, size, step, pos

    def __getitem__(self, key: Any) -> "AffineIndex":
        key = key if isinstance(key, tuple) else (key,)
        if len(key) == 2 and key[1] is None:
            return AffineIndex(self.start, self.size, self.step, 0)
        if len(key) == 2 and key[0] is None:
            return AffineIndex(self.start, self.size, self.step, 1)
        raise legacy("indexing an nl.arange beyond [:, None] / [None, :]", "use slices")

    def _shift(self, k: Any, sign: int = 1) -> "AffineIndex":
        if not isinstance(k, int):
            raise legacy("nl.arange combined with a non-constant", "use slices with Python ints")
        return AffineIndex(self.start + sign * k, self.size, self.step, self.pos)

    def __add__(self, k): return self._shift(k)
    __radd__ = __add__
    def __sub__(self, k): return self._shift(k, -1)

    def __mul__(self, k):
        if not isinstance(k, int) or k <= 0:
            raise legacy("nl.arange scaled by a non-positive or non-constant value", "use slices")
        return AffineIndex(self.start * k, self.size, self.step * k, self.pos)
    __rmul__ = __mul__

    def _mask(self, *a: Any) -> Any:
        raise legacy("a mask built from nl.arange (e.g. i_p < n)", "slice to the valid part: t[0:n]")
    __lt__ = __le__ = __gt__ = __ge__ = _mask

    def as_slice(self) -> slice:
        return slice(self.start, self.start + self.step * (self.size - 1) + 1, self.step)


def arange(*args: int) -> AffineIndex:
    r = builtins.range(*args)
    return AffineIndex(r.start, len(r), r.step)


class _MGrid:
    def __getitem__(self, key: Any) -> tuple:
        key = key if isinstance(key, tuple) else (key,)
        n = len(key)
        out = []
        for i, k in enumerate(key):
            if not isinstance(k, slice):
                raise legacy("nl.mgrid with a non-slice", "use slices")
            r = builtins.range(k.start or 0, k.stop, k.step or 1)
            out.append(AffineIndex(r.start, len(r), r.step, i if n > 1 else None))
        return tuple(out) if n > 1 else out[0]


mgrid = _MGrid()


def affine_to_slices(parts: tuple, ndim: int) -> tuple:
    out = []
    for i, p in enumerate(parts):
        if isinstance(p, AffineIndex):
            if p.pos is not None and p.pos != i and not (p.pos == 1 and i == ndim - 1):
                raise legacy("an nl.arange index placed on another dimension than its own",
                             "use slices in dimension order")
            out.append(p.as_slice())
        else:
            out.append(p)
    return tuple(out)


