"""What every instruction of the ISA checks and how it reads and writes its
operands: the memory spaces an engine reaches, partitions, free axes,
immutable inputs, bounds; reads in fp32 and writes rounded to the
destination's dtype. Also the ISA's enums (engine, oob_mode, reduce_cmd...).
The instructions themselves are isa.py (data movement, TensorE) and
compute.py (ScalarE, VectorE, GpSimd)."""
from __future__ import annotations

import enum
import math
from typing import Any, Optional, Sequence

import torch

from . import launch as _launch
from . import ops as _ops
from .errors import legacy
from .launch import fail
from .memory import NkiTensor, allocate, mark, psum, sbuf


class engine(enum.Enum):
    tensor = "tensor"
    vector = "vector"
    scalar = "scalar"
    gpsimd = "gpsimd"
    dma = "dma"
    sync = "sync"
    unknown = "unknown"


class oob_mode(enum.Enum):
    error = "error"
    skip = "skip"


class reduce_cmd(enum.Enum):
    idle = "idle"
    reset = "reset"
    reduce = "reduce"
    reset_reduce = "reset_reduce"
    load_reduce = "load_reduce"


class dge_mode(enum.Enum):
    unknown = "unknown"
    none = "none"
    swdge = "swdge"
    hwdge = "hwdge"


class nc_version(enum.Enum):
    gen2 = 2
    gen3 = 3
    gen4 = 4


def get_nc_version() -> nc_version:
    launch = _launch.current_or_none()
    from .limits import active_limits
    return nc_version[(launch.limits if launch else active_limits()).generation]


# --- operand checks -------------------------------------------------------------
_SPACE_NAMES = {"sbuf": "nl.sbuf", "psum": "nl.psum", "hbm": "HBM"}


def _space(x: NkiTensor) -> str:
    return x.alloc.buffer.space


def _check_tensor(instr: str, operand: str, x: Any, spaces: Sequence[str], hint: str = "",
                  whole_write: bool = False) -> NkiTensor:
    """Checks an operand's kind, bounds and memory; `whole_write`: the instruction
    overwrites every element of it (new memory then needs no uninitialised fill)."""
    if not isinstance(x, NkiTensor):
        raise fail(instr, f"{operand} is a {type(x).__name__}, expected a tensor (an NKI tile or kernel argument)")
    if x.oob is not None:
        raise fail(instr, f"{operand}: {x.oob}", "index within the tensor (nisa.dma_copy with "
                   "oob_mode=nisa.oob_mode.skip drops the part outside)")
    if x.alloc.buffer.space not in spaces:
        where = " or ".join(_SPACE_NAMES[s] for s in spaces)
        if not hint:
            hint = ("load it into SBUF first (nl.load or nisa.dma_copy)" if _space(x) == "hbm"
                    else "copy it to SBUF first (nisa.tensor_copy)" if _space(x) == "psum" else "")
        raise fail(instr, f"{operand} '{x.name}' is in {_SPACE_NAMES[_space(x)]}; this instruction's engine "
                   f"reads {where}", hint)
    if x.alloc.unfilled is not None:
        x.alloc.touch(whole_write and x.t.numel() == x.alloc.unfilled.numel())
    return x


def _read(instr: str, operand: str, x: Any, spaces: Sequence[str] = ("sbuf", "psum")) -> torch.Tensor:
    _check_tensor(instr, operand, x, spaces)
    return _values(x)


def _values(x: NkiTensor) -> torch.Tensor:
    """The values of an operand already checked, in fp32."""
    if x.aux is not None and x.alloc.buffer is psum:
        mark(x, False)  # reading a PSUM result closes its accumulation group
    t = x.t
    return t if t.dtype is torch.float32 else t.float()


def _free_elems(x: NkiTensor) -> int:
    t = x.t
    if t.dim() == 0:
        return 1
    p = t.shape[0]
    return t.numel() // p if p else math.prod(t.shape[1:])


def _free_axes(instr: str, axis: Any, x: NkiTensor) -> list:
    axes = list(axis) if isinstance(axis, (tuple, list)) else [axis]
    out = []
    for a in axes:
        a = int(a)
        if a < 0:
            a += x.ndim
        if a == 0:
            raise fail(instr, f"axis 0 of '{x.name}' is the partition dimension; reductions run along free axes "
                       "only", "transpose the tile (nisa.nc_transpose) to reduce across partitions")
        if not 0 < a < x.ndim:
            raise fail(instr, f"axis {a} outside tensor '{x.name}' of shape {x.shape}")
        out.append(a)
    return out


def _writable(instr: str, dst: NkiTensor) -> None:
    a = dst.alloc
    if a.input_index < 0:
        return
    launch = _launch.current()
    if not a.mutable and not launch.dry_run:
        raise fail(instr, f"cannot write kernel input '{a.name}': inputs are immutable unless marked mutable",
                   "declare it mutable (nki_op(..., mutates_args={'" + a.name + "'}) or annotate the parameter "
                   "nki.typing.mutable_tensor) or write to an output allocated in nl.shared_hbm")
    launch.written_inputs.add(a.input_index)


def _write(instr: str, dst: Any, values: torch.Tensor, spaces: Sequence[str] = ("sbuf", "psum"),
           operand: str = "dst") -> None:
    _check_tensor(instr, operand, dst, spaces, whole_write=True)
    if dst.alloc.input_index >= 0:
        _writable(instr, dst)
    t = dst.t
    if values.shape != t.shape:
        if values.numel() == t.numel() and values.dim() and values.shape[0] == t.shape[0]:
            values = values.reshape(t.shape)
        else:
            raise fail(instr, f"{operand} '{dst.name}' has shape {dst.shape}, the result has shape "
                       f"{tuple(values.shape)}")
    t.copy_(values)  # rounds to the destination's dtype
    if dst.aux is not None:
        # HBM: these elements are written; PSUM: a plain write leaves no accumulation open.
        mark(dst, dst.alloc.buffer is not psum)


def _same_partitions(instr: str, a: NkiTensor, an: str, b: NkiTensor, bn: str) -> None:
    if a.t.shape[0] != b.t.shape[0]:
        raise fail(instr, f"partition dimension mismatch: {an} has {a.shape[0]} partitions, {bn} has "
                   f"{b.shape[0]}", "operands of one instruction cover the same partitions")


def _engine_name(e: Any, default: str) -> str:
    if e is None:
        return default
    name = e.value if isinstance(e, engine) else str(e)
    return default if name == "unknown" else name


def _gpsimd_no_psum(instr: str, eng: str, *operands: tuple) -> None:
    if eng != "gpsimd":
        return
    for name, x in operands:
        if isinstance(x, NkiTensor) and x.buffer is psum:
            raise fail(instr, f"{name} '{x.name}' is in nl.psum, which GpSimd cannot access",
                       "use engine=nisa.engine.vector, or copy the tile to SBUF")


def _op(instr: str, op: Any, operand: str = "op") -> Any:
    found = _ops.lookup(op)
    if found is None:
        raise fail(instr, f"{operand}={op!r} is not an NKI operation", "pass an nl function such as nl.add or nl.exp")
    return found


def _binary_fn(instr: str, op: Any, operand: str = "op") -> Any:
    o = _op(instr, op, operand)
    if o.kind != "binary":
        raise fail(instr, f"{operand}={o!r} is not a binary operation (nl.add, nl.multiply, nl.maximum, ...)")
    return o.fn


def _reduce_fn(instr: str, op: Any) -> Any:
    o = _op(instr, op)
    if o.kind == "reduce":
        return o.reduce
    if o.kind == "binary" and o.reduce is not None:
        return o.reduce
    raise fail(instr, f"op={o!r} does not reduce (use nl.add, nl.maximum, nl.minimum, nl.multiply)")


def _scalar_or_column(instr: str, operand: str, v: Any, data: NkiTensor) -> Any:
    if isinstance(v, NkiTensor):
        t = _read(instr, operand, v)
        if v.t.shape[0] != data.t.shape[0] or _free_elems(v) != 1:
            raise fail(instr, f"{operand} '{v.name}' has shape {v.shape}; a per-partition operand has shape "
                       f"({data.shape[0]}, 1)")
        return t.reshape((data.t.shape[0],) + (1,) * (data.t.dim() - 1))
    return float(v)


def _math_class(*dtypes: torch.dtype) -> str:
    sizes = [d.itemsize for d in dtypes]
    if max(sizes) >= 4:
        return "float32"
    return "float8" if max(sizes) == 1 else "bfloat16"


def _as(v: Any, like: torch.Tensor) -> torch.Tensor:
    return v if isinstance(v, torch.Tensor) else torch.tensor(v, dtype=like.dtype, device=like.device)
