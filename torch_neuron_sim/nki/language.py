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
from . import operands as _operands
from . import ops as _ops
from .errors import NKIError, legacy
from .launch import fail
from .memory import (  # noqa: F401  (the memory spaces are part of nl)
    NkiTensor, ParDim, allocate, hbm, private_hbm, psum, sbuf, shared_hbm,
)

from .dtypes import (  # noqa: F401,E402  (nl's dtypes)
    bfloat16, bool_, float8_e4m3, float8_e4m3fn, float8_e5m2, float16, float32, int8, int16, int32, tfloat32,
    torch_dtype, uint8, uint16, uint32,
)

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
    """Legacy: n physical cores, a factor of a grid dimension (`nl.spmd_dim(g, nl.nc(2))`, or
    the shorthand `nl.nc(2) * g`). The instances run one after another, as in AWS's simulator."""
    return n


def spmd_dim(*factors: int) -> int:
    """Legacy: a grid dimension sharded over cores, the product of its factors
    (`nl.spmd_dim(g, nl.nc(2))` has 2g instances; program_id runs over all of them)."""
    if not factors or builtins.any(isinstance(f, bool) or not isinstance(f, int) or f <= 0 for f in factors):
        raise fail("nl.spmd_dim", f"factors {factors!r}: expected positive ints (a grid size, nl.nc(cores))")
    return math.prod(factors)


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
        launch.count("vector" if t.buffer is not psum else "vector", _operands._free_elems(t))  # a memset
    return t


# --- HBM <-> SBUF
def load(src: NkiTensor, dtype: Any = None, mask: Any = None, **kwargs: Any) -> NkiTensor:
    if mask is not None:
        raise legacy("nl.load(..., mask=...)", "slice the tensor to the part you want instead")
    _operands._check_tensor("nl.load", "src", src, ("hbm",))
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
    _operands._check_tensor("nl.store", "dst", dst, ("hbm",))
    if not isinstance(value, NkiTensor):
        tile = ndarray(dst.shape, dst.dtype, sbuf)
        _isa.memset(tile, value)
        value = tile
    _operands._check_tensor("nl.store", "value", value, ("sbuf",),
                       hint="copy a PSUM tile to SBUF first (nl.copy / nisa.tensor_copy)")
    if value.shape != dst.shape:
        raise fail("nl.store", f"value shape {value.shape} does not match dst '{dst.name}' shape {dst.shape}")
    _isa.dma_copy(dst, value)


def copy(x: NkiTensor, dtype: Any = None, **kwargs: Any) -> NkiTensor:
    _operands._check_tensor("nl.copy", "x", x, ("sbuf", "psum"))
    out = ndarray(x.shape, dtype or x.dtype, sbuf)
    _isa.tensor_copy(out, x)
    return out


# --- operations: ops.py's, made callable as nl functions returning new tiles
class _NlOp(_ops.Op):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.kind == "unary":
            return _unary(self, *args, **kwargs)
        if self.kind == "binary":
            return _binary(self, *args, **kwargs)
        return _reduce(self, *args, **kwargs)


for _name, _op in list(_ops.REGISTRY.items()):
    _ops.REGISTRY[_name] = globals()[_name] = _NlOp(_op.name, _op.kind, _op.fn, _op.reduce)
del _name, _op
amax, amin = globals()["max"], globals()["min"]


def _unary(op: _ops.Op, x: NkiTensor, dtype: Any = None, mask: Any = None, **kwargs: Any) -> NkiTensor:
    if mask is not None:
        raise legacy(f"nl.{op.name}(..., mask=...)", "compute the whole tile and slice the result")
    _operands._check_tensor(f"nl.{op.name}", "x", x, ("sbuf", "psum"))
    out = ndarray(x.shape, dtype or x.dtype, sbuf)
    _isa.activation(out, op, x)
    return out


def _binary(op: _ops.Op, x: Any, y: Any, dtype: Any = None, mask: Any = None, **kwargs: Any) -> NkiTensor:
    if mask is not None:
        raise legacy(f"nl.{op.name}(..., mask=...)", "compute the whole tile and slice the result")
    instr = f"nl.{op.name}"
    tx, ty = isinstance(x, NkiTensor), isinstance(y, NkiTensor)
    if not tx and not ty:
        raise fail(instr, "needs at least one tile operand (both are Python scalars)")
    if tx:
        _operands._check_tensor(instr, "x", x, ("sbuf", "psum"))
    if ty:
        _operands._check_tensor(instr, "y", y, ("sbuf", "psum"))
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
    out = ndarray(shape, dtype or _ops.result_dtype(x, y), sbuf)
    a = _operands._read(instr, "x", x) if tx else None
    b = _operands._read(instr, "y", y) if ty else None
    ref = a if a is not None else b
    a = a if a is not None else torch.tensor(float(x), device=ref.device)
    b = b if b is not None else torch.tensor(float(y), device=ref.device)
    _operands._write(instr, out, op.fn(a, b).expand(shape))
    _launch.current().count("vector", _operands._free_elems(out))
    return out


def _reduce(op: _ops.Op, x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = False, mask: Any = None,
            **kwargs: Any) -> NkiTensor:
    if mask is not None:
        raise legacy(f"nl.{op.name}(..., mask=...)", "reduce the whole tile and slice the result")
    instr = f"nl.{op.name}"
    _operands._check_tensor(instr, "x", x, ("sbuf", "psum"))
    dims = _operands._free_axes(instr, axis, x)
    values = op.reduce(_operands._read(instr, "x", x), dims, keepdims)
    out = ndarray(tuple(values.shape), dtype or x.dtype, sbuf)
    _operands._write(instr, out, values)
    _launch.current().count("vector", _operands._free_elems(x))
    return out


def where(condition: NkiTensor, x: Any, y: Any, dtype: Any = None, **kwargs: Any) -> NkiTensor:
    instr = "nl.where"
    _operands._check_tensor(instr, "condition", condition, ("sbuf", "psum"))
    ref = x if isinstance(x, NkiTensor) else y if isinstance(y, NkiTensor) else condition
    out = ndarray(condition.shape, dtype or (_ops.result_dtype(*(v for v in (x, y) if isinstance(v, NkiTensor)))
                                             if ref is not condition else float32), sbuf)
    a = x.t.float() if isinstance(x, NkiTensor) else float(x)
    b = y.t.float() if isinstance(y, NkiTensor) else float(y)
    _operands._write(instr, out, torch.where(condition.t != 0, torch.as_tensor(a, device=out.t.device),
                                        torch.as_tensor(b, device=out.t.device)).expand(out.shape))
    _launch.current().count("vector", _operands._free_elems(out))
    return out


def matmul(x: NkiTensor, y: NkiTensor, transpose_x: bool = False, mask: Any = None, **kwargs: Any) -> NkiTensor:
    """x @ y (or x.T @ y) on TensorE into a new fp32 PSUM tile. TensorE contracts
    over the partition dimension, so x is fed transposed: [K, M] stationary."""
    if mask is not None:
        raise legacy("nl.matmul(..., mask=...)", "slice the operands instead")
    _operands._check_tensor("nl.matmul", "x", x, ("sbuf", "psum"))
    _operands._check_tensor("nl.matmul", "y", y, ("sbuf", "psum"))
    if x.ndim != 2 or y.ndim != 2:
        raise fail("nl.matmul", f"operands must be 2-D tiles, got x {x.shape} and y {y.shape}")
    stationary = x if transpose_x else transpose(x)
    out = ndarray((stationary.shape[1], y.shape[1]), float32, psum)
    _isa.nc_matmul(out, stationary, y)
    return out


def transpose(x: NkiTensor, dtype: Any = None, **kwargs: Any) -> NkiTensor:
    """The partition and free dimensions of a 2-D tile swapped (TensorE, through PSUM)."""
    _operands._check_tensor("nl.transpose", "x", x, ("sbuf", "psum"))
    if x.ndim != 2:
        raise fail("nl.transpose", f"x must be a 2-D tile, got shape {x.shape}")
    out = ndarray((x.shape[1], x.shape[0]), dtype or x.dtype, sbuf)
    lim = _launch.current().limits
    if max(x.shape) > lim.pe_transpose_max:
        raise fail("nl.transpose", f"tile {x.shape} exceeds the {lim.pe_transpose_max}x{lim.pe_transpose_max} "
                   "TensorE transpose")
    _operands._write("nl.transpose", out, x.t.float().t())
    _launch.current().count("tensor", x.shape[0])
    return out


def device_print(prefix: str, x: Any, **kwargs: Any) -> None:
    """Prints the tile (the simulator's device_print writes to stdout)."""
    if isinstance(x, NkiTensor) and x.alloc.unfilled is not None:
        x.alloc.touch()
    value = x.t if isinstance(x, NkiTensor) else x
    print(prefix, value)


from .index import arange, mgrid  # noqa: F401,E402  (legacy index tiles)


def par_dim(n: int) -> ParDim:
    """Legacy: marks a shape's partition dimension, behind leading block dimensions
    (`nl.zeros((blocks, nl.par_dim(128), free), ...)`); SBUF is charged per partition for
    blocks x free elements. Anywhere else it is the int n."""
    return ParDim(n)


# Arithmetic on tiles is nl's elementwise functions (legacy kernels write `a + b`);
# installed on the tensor class here, where those functions live.
def _binary_method(name: str, reverse: bool = False) -> Any:
    def method(self: NkiTensor, other: Any) -> NkiTensor:
        op = _ops.REGISTRY[name]
        return op(other, self) if reverse else op(self, other)
    return method


for _dunder, _name, _rev in (("__add__", "add", False), ("__radd__", "add", True), ("__sub__", "subtract", False),
                             ("__rsub__", "subtract", True), ("__mul__", "multiply", False),
                             ("__rmul__", "multiply", True), ("__truediv__", "divide", False),
                             ("__rtruediv__", "divide", True), ("__pow__", "power", False),
                             ("__lt__", "less", False), ("__le__", "less_equal", False),
                             ("__gt__", "greater", False), ("__ge__", "greater_equal", False)):
    setattr(NkiTensor, _dunder, _binary_method(_name, _rev))
NkiTensor.__neg__ = lambda self: _ops.REGISTRY["negative"](self)
del _dunder, _name, _rev


# The language, as `from nki.language import *` and the docs see it: memory spaces, dtypes,
# the grid, tile creation, data movement, the operations (one per entry of ops.REGISTRY)
# and the legacy index tiles. The helpers imported above are not nl.
__all__ = [
    "hbm", "private_hbm", "psum", "sbuf", "shared_hbm",
    "bfloat16", "bool_", "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "float16", "float32", "int8", "int16",
    "int32", "tfloat32", "uint8", "uint16", "uint32",
    "tile_size", "program_id", "num_programs", "program_ndim", "nc", "spmd_dim", "affine_range",
    "sequential_range", "static_range", "par_dim",
    "ndarray", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like",
    "load", "store", "copy", "amax", "amin", "where", "matmul", "transpose", "device_print", "arange", "mgrid",
    *sorted(_ops.REGISTRY),
]
