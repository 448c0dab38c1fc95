"""nki.language (imported as `nl`): dtypes, memory spaces, allocation,
nl.load / nl.store, and the elementwise, reduction and matmul functions that
return new tiles. Each function checks its operands and runs as a few
vectorised torch ops on the tiles (math in fp32, the result rounded to the
output dtype as the hardware stores it); its engine's work is counted for
the cost model. The ISA (nki.isa) is the lower level, writing into a `dst`."""
from __future__ import annotations

import builtins
import math
from typing import Any, Optional

import torch
import torch.nn.functional as F

from . import isa as _isa
from . import launch as _launch
from .errors import NKIError, fail, legacy
from .memory import (  # noqa: F401  (the memory spaces are part of nl)
    NkiTensor, allocate, hbm, private_hbm, psum, sbuf, shared_hbm,
)

# --- dtypes: torch dtypes, so a tile's values are stored as the hardware stores them
bool_ = torch.bool
int8, int16, int32 = torch.int8, torch.int16, torch.int32
uint8, uint16, uint32 = torch.uint8, torch.uint16, torch.uint32
float16, bfloat16, float32 = torch.float16, torch.bfloat16, torch.float32
tfloat32 = torch.float32   # tf32 is an fp32 storage format fed to TensorE at reduced precision
float8_e4m3 = torch.float8_e4m3fn  # the IEEE-like e4m3 (no infinities) torch stores
float8_e4m3fn = torch.float8_e4m3fn
float8_e5m2 = torch.float8_e5m2

_DTYPE_NAMES = {
    "bool": bool_, "bool_": bool_, "int8": int8, "int16": int16, "int32": int32, "uint8": uint8,
    "uint16": uint16, "uint32": uint32, "float16": float16, "bfloat16": bfloat16, "float32": float32,
    "tfloat32": float32, "float8_e4m3": float8_e4m3, "float8_e4m3fn": float8_e4m3fn, "float8_e5m2": float8_e5m2,
    "int64": int32, "float64": float32,  # 64-bit host arrays are 32-bit on the device
}


def torch_dtype(dtype: Any) -> torch.dtype:
    """A dtype as nl, numpy, torch or a string names it."""
    if isinstance(dtype, torch.dtype):
        if dtype in (torch.float64, torch.int64):
            return torch.float32 if dtype.is_floating_point else torch.int32
        return dtype
    name = getattr(dtype, "__name__", None) or getattr(dtype, "name", None) or str(dtype)
    name = str(name).replace("numpy.", "")
    if name in _DTYPE_NAMES:
        return _DTYPE_NAMES[name]
    raise NKIError(f"dtype {dtype!r} is not an NKI dtype: use nl.bfloat16, nl.float16, nl.float32, nl.float8_e4m3, "
                   "nl.float8_e5m2, nl.int8/16/32, nl.uint8/16/32 or nl.bool_ (the MX x4 types are not simulated)")


# --- tile sizes of the active generation
class _TileSize:
    """nl.tile_size: the limits of the generation the kernel runs on."""

    def _lim(self):
        launch = _launch.current_or_none()
        if launch is not None:
            return launch.limits
        from .limits import active_limits
        return active_limits()

    @property
    def pmax(self) -> int:
        return self._lim().pmax

    @property
    def psum_fmax(self) -> int:
        return self._lim().psum_fmax

    @property
    def gemm_stationary_fmax(self) -> int:
        return self._lim().stationary_fmax

    @property
    def gemm_moving_fmax(self) -> int:
        return self._lim().moving_fmax_fp32

    @property
    def total_available_sbuf_size(self) -> int:
        return self._lim().sbuf_bytes_per_partition

    @property
    def psum_partition_size(self) -> int:
        return self._lim().psum_bytes_per_partition


tile_size = _TileSize()


# --- the grid
def program_id(axis: int = 0) -> int:
    launch = _launch.current()
    if not launch.grid:
        return 0
    if not 0 <= axis < len(launch.grid):
        raise fail("nl.program_id", f"axis {axis} outside the launch grid {launch.grid}")
    return launch.program[axis]


def num_programs(axis: Optional[int] = None) -> Any:
    launch = _launch.current()
    if axis is None:
        return tuple(launch.grid) if len(launch.grid) != 1 else launch.grid[0]
    if not launch.grid:
        return 1
    if not 0 <= axis < len(launch.grid):
        raise fail("nl.num_programs", f"axis {axis} outside the launch grid {launch.grid}")
    return launch.grid[axis]


def program_ndim() -> int:
    return len(_launch.current().grid)


def nc(n: int) -> int:
    """Legacy: shard a grid dimension over n cores; the simulator runs them one after another."""
    return n


spmd_dim = nc


# --- loops: every loop unrolls when the kernel is specialised, so all are `range`
def affine_range(*args: Any, **kwargs: Any) -> range:
    return builtins.range(*args)


sequential_range = static_range = affine_range


# --- allocation
def ndarray(shape: Any, dtype: Any, buffer: Any = sbuf, name: Optional[str] = None, **kwargs: Any) -> NkiTensor:
    return allocate(shape, dtype, buffer, name)


def zeros(shape: Any, dtype: Any, buffer: Any = sbuf, name: Optional[str] = None, **kwargs: Any) -> NkiTensor:
    return _filled(shape, dtype, buffer, name, 0)


def ones(shape: Any, dtype: Any, buffer: Any = sbuf, name: Optional[str] = None, **kwargs: Any) -> NkiTensor:
    return _filled(shape, dtype, buffer, name, 1)


def full(shape: Any, fill_value: Any, dtype: Any, buffer: Any = sbuf, name: Optional[str] = None,
         **kwargs: Any) -> NkiTensor:
    return _filled(shape, dtype, buffer, name, fill_value)


def empty_like(x: NkiTensor, dtype: Any = None, buffer: Any = None, name: Optional[str] = None) -> NkiTensor:
    return ndarray(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def zeros_like(x: NkiTensor, dtype: Any = None, buffer: Any = None, name: Optional[str] = None) -> NkiTensor:
    return zeros(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def ones_like(x: NkiTensor, dtype: Any = None, buffer: Any = None, name: Optional[str] = None) -> NkiTensor:
    return ones(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def full_like(x: NkiTensor, fill_value: Any, dtype: Any = None, buffer: Any = None,
              name: Optional[str] = None) -> NkiTensor:
    return full(x.shape, fill_value, dtype or x.dtype, buffer or x.buffer, name)


def _filled(shape: Any, dtype: Any, buffer: Any, name: Optional[str], value: Any) -> NkiTensor:
    t = allocate(shape, dtype, buffer, name, fill=value)
    if t.buffer.on_chip:
        launch = _launch.current()
        launch.count("vector" if t.buffer is not psum else "vector", _isa._free_elems(t))  # a memset
    return t


# --- HBM <-> SBUF
def load(src: NkiTensor, dtype: Any = None, mask: Any = None, **kwargs: Any) -> NkiTensor:
    if mask is not None:
        raise legacy("nl.load(..., mask=...)", "slice the tensor to the part you want instead")
    _isa._check_tensor("nl.load", "src", src, ("hbm",))
    if src.ndim == 0:
        raise fail("nl.load", f"src '{src.name}' is a scalar; load at least one element")
    pmax = _launch.current().limits.pmax
    if src.shape[0] > pmax:
        raise fail("nl.load", f"partition dimension {src.shape[0]} of src '{src.name}' {src.shape} exceeds maximum "
                   f"{pmax}", "load at most 128 rows at a time: slice the tensor")
    out = ndarray(src.shape, dtype or src.dtype, sbuf)
    _isa.dma_copy(out, src)
    return out


def store(dst: NkiTensor, value: Any, mask: Any = None, **kwargs: Any) -> None:
    if mask is not None:
        raise legacy("nl.store(..., mask=...)", "slice the destination to the part you want instead")
    _isa._check_tensor("nl.store", "dst", dst, ("hbm",))
    if not isinstance(value, NkiTensor):
        tile = ndarray(dst.shape, dst.dtype, sbuf)
        _isa.memset(tile, value)
        value = tile
    _isa._check_tensor("nl.store", "value", value, ("sbuf",),
                       hint="copy a PSUM tile to SBUF first (nl.copy / nisa.tensor_copy)")
    if value.shape != dst.shape:
        raise fail("nl.store", f"value shape {value.shape} does not match dst '{dst.name}' shape {dst.shape}")
    _isa.dma_copy(dst, value)


def copy(x: NkiTensor, dtype: Any = None, **kwargs: Any) -> NkiTensor:
    _isa._check_tensor("nl.copy", "x", x, ("sbuf", "psum"))
    out = ndarray(x.shape, dtype or x.dtype, sbuf)
    _isa.tensor_copy(out, x)
    return out


# --- operations (usable as nl functions and as the `op` of ISA instructions)
class _Op:
    """An elementwise or reduction operation: `fn` is its math on fp32 tensors."""

    def __init__(self, name: str, kind: str, fn: Any, reduce: Any = None) -> None:
        self.name = name
        self.kind = kind      # "unary", "binary" or "reduce"
        self.fn = fn
        self.reduce = reduce  # for binary ops that reduce (add -> sum): fn(t, dims, keepdim)
        self.__name__ = name

    def __repr__(self) -> str:
        return f"nl.{self.name}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.kind == "unary":
            return _unary(self, *args, **kwargs)
        if self.kind == "binary":
            return _binary(self, *args, **kwargs)
        return _reduce(self, *args, **kwargs)


def _gelu_tanh(t: torch.Tensor) -> torch.Tensor:
    return F.gelu(t, approximate="tanh")


_UNARY = {
    "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "tanh": torch.tanh,
    "sigmoid": torch.sigmoid, "relu": torch.relu, "gelu": F.gelu, "gelu_apprx_tanh": _gelu_tanh,
    "silu": F.silu, "square": torch.square, "reciprocal": torch.reciprocal, "abs": torch.abs,
    "negative": torch.neg, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "arctan": torch.atan,
    "erf": torch.erf, "sign": torch.sign, "softplus": F.softplus, "mish": F.mish, "floor": torch.floor,
    "ceil": torch.ceil, "trunc": torch.trunc, "exp2": torch.exp2, "log2": torch.log2,
    "bypass": lambda t: t, "identity": lambda t: t, "invert": torch.bitwise_not,
    "logical_not": torch.logical_not,
}
_BINARY = {
    "add": (torch.add, lambda t, d, k: torch.sum(t, d, keepdim=k)),
    "subtract": (torch.sub, None),
    "multiply": (torch.mul, lambda t, d, k: torch.prod(t, d[0], keepdim=k) if len(d) == 1 else
                 torch.prod(t.flatten(d[0]), d[0], keepdim=False)),
    "divide": (torch.div, None),
    "maximum": (torch.maximum, lambda t, d, k: torch.amax(t, d, keepdim=k)),
    "minimum": (torch.minimum, lambda t, d, k: torch.amin(t, d, keepdim=k)),
    "power": (torch.pow, None), "fmod": (torch.fmod, None), "mod": (torch.remainder, None),
    "equal": (torch.eq, None), "not_equal": (torch.ne, None), "greater": (torch.gt, None),
    "greater_equal": (torch.ge, None), "less": (torch.lt, None), "less_equal": (torch.le, None),
    "logical_and": (torch.logical_and, None), "logical_or": (torch.logical_or, None),
    "logical_xor": (torch.logical_xor, None), "bitwise_and": (torch.bitwise_and, None),
    "bitwise_or": (torch.bitwise_or, None), "bitwise_xor": (torch.bitwise_xor, None),
}
_REDUCE = {
    "sum": lambda t, d, k: torch.sum(t, d, keepdim=k),
    "max": lambda t, d, k: torch.amax(t, d, keepdim=k),
    "min": lambda t, d, k: torch.amin(t, d, keepdim=k),
    "mean": lambda t, d, k: torch.mean(t, d, keepdim=k),
    "var": lambda t, d, k: torch.var(t, d, keepdim=k, unbiased=False),
    "prod": lambda t, d, k: torch.prod(t.flatten(d[0]), d[0], keepdim=k) if len(d) > 1 else
    torch.prod(t, d[0], keepdim=k),
    "all": lambda t, d, k: torch.amin(t != 0, d, keepdim=k),
    "any": lambda t, d, k: torch.amax(t != 0, d, keepdim=k),
}

for _name, _fn in _UNARY.items():
    globals()[_name] = _Op(_name, "unary", _fn)
for _name, (_fn, _red) in _BINARY.items():
    globals()[_name] = _Op(_name, "binary", _fn, _red)
for _name, _fn in _REDUCE.items():
    globals()[_name] = _Op(_name, "reduce", None, _fn)
del _name, _fn
amax, amin = globals()["max"], globals()["min"]


def _result_dtype(*xs: Any) -> torch.dtype:
    tiles = [x.dtype for x in xs if isinstance(x, NkiTensor)]
    if not tiles:
        return float32
    floats = [d for d in tiles if d.is_floating_point]
    if floats:
        if len(set(floats)) == 1:
            return floats[0]
        if set(floats) == {float16, bfloat16}:
            return float32  # fp16 with bf16: neither holds the other
        return max(floats, key=lambda d: d.itemsize)
    out = tiles[0]
    for d in tiles[1:]:
        out = torch.promote_types(out, d)
    return out


def _unary(op: _Op, x: NkiTensor, dtype: Any = None, mask: Any = None, **kwargs: Any) -> NkiTensor:
    if mask is not None:
        raise legacy(f"nl.{op.name}(..., mask=...)", "compute the whole tile and slice the result")
    _isa._check_tensor(f"nl.{op.name}", "x", x, ("sbuf", "psum"))
    out = ndarray(x.shape, dtype or x.dtype, sbuf)
    _isa.activation(out, op, x)
    return out


def _binary(op: _Op, x: Any, y: Any, dtype: Any = None, mask: Any = None, **kwargs: Any) -> NkiTensor:
    if mask is not None:
        raise legacy(f"nl.{op.name}(..., mask=...)", "compute the whole tile and slice the result")
    instr = f"nl.{op.name}"
    tx, ty = isinstance(x, NkiTensor), isinstance(y, NkiTensor)
    if not tx and not ty:
        raise fail(instr, "needs at least one tile operand (both are Python scalars)")
    if tx:
        _isa._check_tensor(instr, "x", x, ("sbuf", "psum"))
    if ty:
        _isa._check_tensor(instr, "y", y, ("sbuf", "psum"))
    if tx and ty:
        if x.shape[0] != y.shape[0]:
            raise fail(instr, f"partition dimension mismatch: x has {x.shape[0]} partitions, y has {y.shape[0]}",
                       "operands must cover the same partitions; broadcasting runs along free dimensions only")
        try:
            shape = torch.broadcast_shapes(x.shape, y.shape)
        except RuntimeError:
            raise fail(instr, f"shapes {x.shape} and {y.shape} do not broadcast") from None
    else:
        shape = x.shape if tx else y.shape
    out = ndarray(shape, dtype or _result_dtype(x, y), sbuf)
    a = _isa._read(instr, "x", x) if tx else None
    b = _isa._read(instr, "y", y) if ty else None
    ref = a if a is not None else b
    a = a if a is not None else torch.tensor(float(x), device=ref.device)
    b = b if b is not None else torch.tensor(float(y), device=ref.device)
    _isa._write(instr, out, op.fn(a, b).expand(shape))
    _launch.current().count("vector", _isa._free_elems(out))
    return out


def _reduce(op: _Op, x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = False, mask: Any = None,
            **kwargs: Any) -> NkiTensor:
    if mask is not None:
        raise legacy(f"nl.{op.name}(..., mask=...)", "reduce the whole tile and slice the result")
    instr = f"nl.{op.name}"
    _isa._check_tensor(instr, "x", x, ("sbuf", "psum"))
    dims = _isa._free_axes(instr, axis, x)
    values = op.reduce(_isa._read(instr, "x", x), dims, keepdims)
    out = ndarray(tuple(values.shape), dtype or x.dtype, sbuf)
    _isa._write(instr, out, values)
    _launch.current().count("vector", _isa._free_elems(x))
    return out


def where(condition: NkiTensor, x: Any, y: Any, dtype: Any = None, **kwargs: Any) -> NkiTensor:
    instr = "nl.where"
    _isa._check_tensor(instr, "condition", condition, ("sbuf", "psum"))
    ref = x if isinstance(x, NkiTensor) else y if isinstance(y, NkiTensor) else condition
    out = ndarray(condition.shape, dtype or (_result_dtype(*(v for v in (x, y) if isinstance(v, NkiTensor)))
                                             if ref is not condition else float32), sbuf)
    a = x.t.float() if isinstance(x, NkiTensor) else float(x)
    b = y.t.float() if isinstance(y, NkiTensor) else float(y)
    _isa._write(instr, out, torch.where(condition.t != 0, torch.as_tensor(a, device=out.t.device),
                                        torch.as_tensor(b, device=out.t.device)).expand(out.shape))
    _launch.current().count("vector", _isa._free_elems(out))
    return out


def matmul(x: NkiTensor, y: NkiTensor, transpose_x: bool = False, mask: Any = None, **kwargs: Any) -> NkiTensor:
    """x @ y (or x.T @ y) on TensorE into a new fp32 PSUM tile. TensorE contracts
    over the partition dimension, so x is fed transposed: [K, M] stationary."""
    if mask is not None:
        raise legacy("nl.matmul(..., mask=...)", "slice the operands instead")
    _isa._check_tensor("nl.matmul", "x", x, ("sbuf", "psum"))
    _isa._check_tensor("nl.matmul", "y", y, ("sbuf", "psum"))
    if x.ndim != 2 or y.ndim != 2:
        raise fail("nl.matmul", f"operands must be 2-D tiles, got x {x.shape} and y {y.shape}")
    stationary = x if transpose_x else transpose(x)
    out = ndarray((stationary.shape[1], y.shape[1]), float32, psum)
    _isa.nc_matmul(out, stationary, y)
    return out


def transpose(x: NkiTensor, dtype: Any = None, **kwargs: Any) -> NkiTensor:
    """The partition and free dimensions of a 2-D tile swapped (TensorE, through PSUM)."""
    _isa._check_tensor("nl.transpose", "x", x, ("sbuf", "psum"))
    if x.ndim != 2:
        raise fail("nl.transpose", f"x must be a 2-D tile, got shape {x.shape}")
    out = ndarray((x.shape[1], x.shape[0]), dtype or x.dtype, sbuf)
    lim = _launch.current().limits
    if max(x.shape) > lim.pe_transpose_max:
        raise fail("nl.transpose", f"tile {x.shape} exceeds the {lim.pe_transpose_max}x{lim.pe_transpose_max} "
                   "TensorE transpose")
    _isa._write("nl.transpose", out, x.t.float().t())
    _launch.current().count("tensor", x.shape[0])
    return out


def device_print(prefix: str, x: Any, **kwargs: Any) -> None:
    """Prints the tile (the simulator's device_print writes to stdout)."""
    if isinstance(x, NkiTensor) and x.alloc.unfilled is not None:
        x.alloc.touch()
    value = x.t if isinstance(x, NkiTensor) else x
    print(prefix, value)


# --- the legacy dialect's index tiles: nl.arange / nl.mgrid as affine ranges
class _AffineIndex:
    """start + step * arange(size), placed on one dimension of an index
    expression (legacy `nl.arange(128)[:, None]`). Only the affine forms that
    name a rectangular block are supported; they become slices."""

    def __init__(self, start: int, size: int, step: int = 1, pos: Optional[int] = None) -> None:
        self.start, self.size, self.step, self.pos = start, size, step, pos

    def __getitem__(self, key: Any) -> "_AffineIndex":
        key = key if isinstance(key, tuple) else (key,)
        if len(key) == 2 and key[1] is None:
            return _AffineIndex(self.start, self.size, self.step, 0)
        if len(key) == 2 and key[0] is None:
            return _AffineIndex(self.start, self.size, self.step, 1)
        raise legacy("indexing an nl.arange beyond [:, None] / [None, :]", "use slices")

    def _shift(self, k: Any, sign: int = 1) -> "_AffineIndex":
        if not isinstance(k, int):
            raise legacy("nl.arange combined with a non-constant", "use slices with Python ints")
        return _AffineIndex(self.start + sign * k, self.size, self.step, self.pos)

    def __add__(self, k): return self._shift(k)
    __radd__ = __add__
    def __sub__(self, k): return self._shift(k, -1)

    def __mul__(self, k):
        if not isinstance(k, int) or k <= 0:
            raise legacy("nl.arange scaled by a non-positive or non-constant value", "use slices")
        return _AffineIndex(self.start * k, self.size, self.step * k, self.pos)
    __rmul__ = __mul__

    def _mask(self, *a: Any) -> Any:
        raise legacy("a mask built from nl.arange (e.g. i_p < n)", "slice to the valid part: t[0:n]")
    __lt__ = __le__ = __gt__ = __ge__ = _mask

    def as_slice(self) -> slice:
        return slice(self.start, self.start + self.step * (self.size - 1) + 1, self.step)


def arange(*args: int) -> _AffineIndex:
    r = builtins.range(*args)
    return _AffineIndex(r.start, len(r), r.step)


class _MGrid:
    def __getitem__(self, key: Any) -> tuple:
        key = key if isinstance(key, tuple) else (key,)
        n = len(key)
        out = []
        for i, k in enumerate(key):
            if not isinstance(k, slice):
                raise legacy("nl.mgrid with a non-slice", "use slices")
            r = builtins.range(k.start or 0, k.stop, k.step or 1)
            out.append(_AffineIndex(r.start, len(r), r.step, i if n > 1 else None))
        return tuple(out) if n > 1 else out[0]


mgrid = _MGrid()


def _affine_to_slices(parts: tuple, ndim: int) -> tuple:
    out = []
    for i, p in enumerate(parts):
        if isinstance(p, _AffineIndex):
            if p.pos is not None and p.pos != i and not (p.pos == 1 and i == ndim - 1):
                raise legacy("an nl.arange index placed on another dimension than its own",
                             "use slices in dimension order")
            out.append(p.as_slice())
        else:
            out.append(p)
    return tuple(out)


def par_dim(n: int) -> int:
    """Legacy: marks a shape's partition dimension; the partition dimension is always dim 0 now."""
    return n
