"""nki.isa (imported as `nisa`): the NeuronCore's instructions, destination
first. Each checks its operands as the hardware requires (memory spaces the
engine can reach, partition sizes, per-generation tile limits, immutable
inputs, bounds), runs as a few vectorised torch ops in fp32, rounds the result
to the destination's dtype, and counts its engine's work for the cost model.

Kernels of the legacy dialect call some instructions without `dst` and use
the returned tile; those forms are recognised by their arguments and work."""
from __future__ import annotations

import enum
import math
from typing import Any, Optional, Sequence

import torch

from . import launch as _launch
from . import ops as _ops
from .errors import legacy
from .launch import fail
from .memory import NkiTensor, allocate, mark, marks, psum, sbuf, view
from .compute import (  # noqa: F401  (the rest of nki.isa)
    activation, activation_reduce, affine_select, iota, range_select, tensor_reduce, tensor_scalar, tensor_tensor,
    tensor_tensor_scan,
)
from . import operands as _operands
from .operands import dge_mode, engine, get_nc_version, nc_version, oob_mode, reduce_cmd


# --- data movement -----------------------------------------------------------------
def dma_copy(dst: NkiTensor, src: NkiTensor, oob_mode: Any = oob_mode.error, dge_mode: Any = None,
             **kwargs: Any) -> None:
    instr = "nisa.dma_copy"
    for name, x in (("dst", dst), ("src", src)):
        if not isinstance(x, NkiTensor):
            raise fail(instr, f"{name} is a {type(x).__name__}, expected a tensor")
        if x.alloc.buffer is psum:
            raise fail(instr, f"{name} '{x.name}' is in nl.psum, which DMA cannot access",
                       "copy the PSUM tile to SBUF first (nisa.tensor_copy)")
        if x.oob is not None and not (oob_mode is not None and getattr(oob_mode, "value", oob_mode) == "skip"):
            raise fail(instr, f"{name}: {x.oob}", "index within the tensor, or pass "
                       "oob_mode=nisa.oob_mode.skip to drop the part outside")
    if src.alloc.unfilled is not None:
        src.alloc.touch()
    s, d = src.t, dst.t
    if src.oob is not None or dst.oob is not None:
        # Skip mode: the in-bounds part of each side, element for element.
        if s.dim() != d.dim():
            raise fail(instr, f"oob_mode.skip needs dst and src of the same rank, got {dst.shape} and {src.shape}")
        n = [min(a, b) for a, b in zip(s.shape, d.shape)]
        key = tuple(slice(0, k) for k in n)
        s, d = s[key], d[key]
        dst = NkiTensor(d, dst.alloc, dst.aux[key] if dst.aux is not None else None)
    elif s.numel() != d.numel():
        raise fail(instr, f"dst '{dst.name}' {dst.shape} has {d.numel()} elements, src '{src.name}' {src.shape} "
                   f"has {s.numel()}", "DMA copies element for element: both sides need the same count")
    values = s if s.dtype == d.dtype else s.float()
    _operands._write(instr, dst, values if values.shape == d.shape else values.reshape(d.shape), ("sbuf", "hbm"))
    launch = _launch.current()
    launch.count("dma")
    nbytes = d.numel() * max(s.dtype.itemsize, d.dtype.itemsize)
    work = launch.work
    work.dma_bytes += nbytes
    work.hbm_bytes += nbytes * ((not dst.alloc.buffer.on_chip) + (not src.alloc.buffer.on_chip))


def tensor_copy(dst: NkiTensor, src: Optional[NkiTensor] = None, engine: Any = None, dtype: Any = None,
                **kwargs: Any) -> Any:
    if src is None:  # legacy: tensor_copy(src, dtype=...) returns the copy
        out = allocate(dst.shape, dtype or dst.dtype, sbuf)
        tensor_copy(out, dst, engine=engine)
        return out
    instr = "nisa.tensor_copy"
    eng = _operands._engine_name(engine, "vector")
    _operands._gpsimd_no_psum(instr, eng, ("dst", dst), ("src", src))
    values = _operands._read(instr, "src", src) if src.dtype != dst.dtype or src.buffer is psum else \
        _operands._check_tensor(instr, "src", src, ("sbuf", "psum")).t
    _operands._same_partitions(instr, dst, "dst", src, "src")
    _operands._write(instr, dst, values)
    _launch.current().count(eng, _operands._free_elems(dst))


def memset(dst: NkiTensor, value: Any, engine: Any = None, **kwargs: Any) -> None:
    instr = "nisa.memset"
    eng = _operands._engine_name(engine, "vector")
    _operands._gpsimd_no_psum(instr, eng, ("dst", dst))
    _operands._check_tensor(instr, "dst", dst, ("sbuf", "psum"), whole_write=True)
    _operands._writable(instr, dst)
    dst.t.fill_(value)
    mark(dst, False)
    _launch.current().count(eng, _operands._free_elems(dst))


def _assign(dst: NkiTensor, value: Any) -> None:
    """`dst[...] = value` (legacy assignment): a copy on-chip, a DMA to or from HBM, a memset for a scalar."""
    if isinstance(value, NkiTensor):
        if value.alloc is dst.alloc and value.t.data_ptr() == dst.t.data_ptr() and value.shape == dst.shape:
            return  # `t[...] += x` assigns t[...] to itself after the in-place add
        if dst.buffer.hbm or value.buffer.hbm:
            dma_copy(dst, value)
        else:
            tensor_copy(dst, value)
    else:
        memset(dst, value)


def _accumulate(dst: NkiTensor, value: Any) -> NkiTensor:
    """`dst += value` on a tile (the legacy PSUM accumulation `psum[...] += nisa.nc_matmul(...)`)."""
    instr = "+="
    cur = _operands._read(instr, "dst", dst)
    v = _operands._read(instr, "value", value) if isinstance(value, NkiTensor) else float(value)
    _operands._write(instr, dst, cur + v)
    _launch.current().count("vector", _operands._free_elems(dst))
    return dst


# --- TensorE -------------------------------------------------------------------------
def nc_matmul(dst: NkiTensor, stationary: Any = None, moving: Any = None, accumulate: Optional[bool] = None,
              **kwargs: Any) -> Any:
    """dst[M, N] (PSUM, fp32) = stationary[K, M]ᵀ · moving[K, N]; K on the partitions.
    accumulate=None: the first write to a PSUM region overwrites it and later
    ones add, until an instruction reads the result."""
    if moving is None:  # legacy: nc_matmul(stationary, moving) returns the product
        s, m = dst, stationary
        out = allocate((_operands._free_elems(s), _operands._free_elems(m)), torch.float32, psum)
        nc_matmul(out, s, m, accumulate=False)
        return out
    instr = "nisa.nc_matmul"
    launch = _launch.current()
    lim = launch.limits
    _operands._check_tensor(instr, "stationary", stationary, ("sbuf",), hint="TensorE reads its operands from SBUF")
    _operands._check_tensor(instr, "moving", moving, ("sbuf",), hint="TensorE reads its operands from SBUF")
    # New PSUM needs no uninitialised fill unless the product is added to it (accumulate=True).
    _operands._check_tensor(instr, "dst", dst, ("psum",), hint="TensorE writes its result to PSUM",
                  whole_write=accumulate is not True)
    k = stationary.t.shape[0]
    if moving.t.shape[0] != k:
        raise fail(instr, f"partition dimension mismatch: stationary has {k} partitions (K), moving has "
                   f"{moving.shape[0]}", "both operands hold the contraction dimension K on the partitions")
    m_size, n_size = _operands._free_elems(stationary), _operands._free_elems(moving)
    if m_size > lim.stationary_fmax:
        raise fail(instr, f"stationary free size {m_size} exceeds maximum {lim.stationary_fmax}",
                   "tile M by 128")
    n_max = lim.moving_fmax(moving.dtype.itemsize)
    if n_size > n_max:
        raise fail(instr, f"moving free size {n_size} exceeds maximum {n_max} on {lim.profile} "
                   f"({lim.generation})", f"tile N by {n_max}")
    if not (stationary.dtype.is_floating_point and moving.dtype.is_floating_point):
        raise fail(instr, f"operands must be floating point, got stationary {stationary.dtype}, moving {moving.dtype}")
    if dst.t.numel() != m_size * n_size or dst.t.shape[0] != m_size:
        raise fail(instr, f"dst '{dst.name}' has shape {dst.shape}; the product is ({m_size}, {n_size})")
    _operands._writable(instr, dst)
    s, m = _operand_matrix(stationary.t, k, m_size), _operand_matrix(moving.t, k, n_size)
    if accumulate is None:
        # Add where an accumulation is open; the common cases (none or all) without a select.
        accumulate = marks(dst)
        if accumulate is None and dst.t.device.type == "meta":
            accumulate = False
    out = _matrix_view(dst.t, m_size, n_size) if dst.t.dtype == torch.float32 else None
    if out is not None and accumulate is not None:
        # fp32 PSUM seen as an M x N matrix: one matmul writes or adds into it, no temporary.
        if accumulate:
            out.addmm_(s.t(), m)
        else:
            torch.mm(s.t(), m, out=out)
    else:
        product = (s.t() @ m).reshape(dst.shape)
        if accumulate is None:
            product = product + torch.where(dst.aux, dst.t.float(), torch.zeros((), device=product.device))
        elif accumulate:
            product = product + dst.t.float()
        dst.t.copy_(product)
    mark(dst, True)
    launch.count("tensor", n_size)
    launch.work.flops[_operands._math_class(stationary.dtype, moving.dtype)] += 2.0 * k * m_size * n_size


def _operand_matrix(t: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """A matmul operand as a rows x cols fp32 matrix (a view when it is one already)."""
    if t.dim() != 2:
        t = t.reshape(rows, cols)
    return t if t.dtype is torch.float32 else t.float()


def _matrix_view(t: torch.Tensor, rows: int, cols: int) -> Optional[torch.Tensor]:
    """t as a rows x cols matrix sharing its memory, or None when its strides do not allow one."""
    if t.dim() == 2:
        return t
    try:
        return t.view(rows, cols)
    except RuntimeError:
        return None


def nc_transpose(dst: NkiTensor, data: Any = None, engine: Any = None, **kwargs: Any) -> Any:
    """dst = dataᵀ: on TensorE (SBUF -> PSUM, up to 128x128) or VectorE (up to 32x32)."""
    if data is None:  # legacy: nc_transpose(data, engine=...) returns the transpose
        src = dst
        eng = _operands._engine_name(engine, "tensor" if max(src.shape) > 32 or src.buffer is sbuf else "vector")
        out = allocate((src.shape[1], src.shape[0]), src.dtype if eng == "vector" else torch.float32,
                         psum if eng == "tensor" else sbuf)
        nc_transpose(out, src, engine=eng)
        return out
    instr = "nisa.nc_transpose"
    lim = _launch.current().limits
    eng = _operands._engine_name(engine, "tensor" if dst.buffer is psum and data.buffer is sbuf else "vector")
    if data.ndim != 2 and _operands._free_elems(data) * data.shape[0] != data.t.numel():
        raise fail(instr, f"data must be a 2-D tile, got {data.shape}")
    p, f = data.t.shape[0], _operands._free_elems(data)
    if eng == "tensor":
        _operands._check_tensor(instr, "data", data, ("sbuf",), hint="a TensorE transpose reads SBUF")
        _operands._check_tensor(instr, "dst", dst, ("psum",), hint="a TensorE transpose writes PSUM")
        limit = lim.pe_transpose_max
    elif eng == "vector":
        _operands._check_tensor(instr, "data", data, ("sbuf", "psum"))
        limit = lim.vector_transpose_max
    else:
        raise fail(instr, f"engine {eng} cannot transpose", "use nisa.engine.tensor or nisa.engine.vector")
    if p > limit or f > limit:
        raise fail(instr, f"data {data.shape} exceeds the {limit}x{limit} transpose of the {eng} engine")
    values = _operands._read(instr, "data", data).reshape(p, f).t()
    _operands._write(instr, dst, values)
    launch = _launch.current()
    launch.count(eng, f if eng == "vector" else p)
    if eng == "tensor":
        launch.work.flops[_operands._math_class(data.dtype)] += 2.0 * p * p * f  # an identity matmul


# `t[...] = value` and the legacy `psum[...] += nisa.nc_matmul(...)` on a tensor.
def _setitem(self: NkiTensor, index: Any, value: Any) -> None:
    _assign(view(self, index, "assignment"), value)


NkiTensor.__setitem__ = _setitem
NkiTensor.__iadd__ = _accumulate


# The instruction set, as `from nki.isa import *` and the docs see it; the helpers every
# instruction shares live in operands.py and compute.py, not here.
__all__ = [
    "dma_copy", "tensor_copy", "memset", "nc_matmul", "nc_transpose",
    "activation", "activation_reduce", "affine_select", "iota", "range_select", "tensor_reduce", "tensor_scalar",
    "tensor_tensor",
    "dge_mode", "engine", "get_nc_version", "nc_version", "oob_mode", "reduce_cmd",
]
