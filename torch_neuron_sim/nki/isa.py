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
from .errors import fail, legacy
from .memory import NkiTensor, psum, sbuf


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
    if x.buffer is psum and x.aux is not None:
        x.aux.fill_(False)  # reading a PSUM result closes its accumulation group
    return x.t.float()


def _free_elems(x: NkiTensor) -> int:
    shape = x.t.shape
    return math.prod(shape[1:]) if shape else 1


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
    _writable(instr, dst)
    if tuple(values.shape) != dst.shape:
        if values.numel() == dst.t.numel() and values.dim() and values.shape[0] == dst.shape[0]:
            values = values.reshape(dst.shape)
        else:
            raise fail(instr, f"{operand} '{dst.name}' has shape {dst.shape}, the result has shape "
                       f"{tuple(values.shape)}")
    dst.t.copy_(values)
    if dst.aux is not None:
        if dst.buffer is psum:
            dst.aux.fill_(False)
        else:
            dst.aux.fill_(True)


def _same_partitions(instr: str, a: NkiTensor, an: str, b: NkiTensor, bn: str) -> None:
    if a.shape[0] != b.shape[0]:
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


_nl: Any = None


def _language() -> Any:
    global _nl
    if _nl is None:
        from . import language
        _nl = language
    return _nl


def _op(instr: str, op: Any, operand: str = "op") -> Any:
    nl = _language()
    if type(op) is nl._Op:
        return op
    name = getattr(op, "__name__", None)
    # Legacy kernels pass numpy ufuncs (np.add, np.exp...).
    aliases = {"copy": "bypass", "true_divide": "divide", "amax": "max", "amin": "min", "negative": "negative", "max": "maximum",
               "min": "minimum"}
    if name is not None:
        candidate = getattr(nl, aliases.get(name, name), None)
        if isinstance(candidate, nl._Op):
            return candidate
    raise fail(instr, f"{operand}={op!r} is not an NKI operation", "pass an nl function such as nl.add or nl.exp")


def _binary_fn(instr: str, op: Any, operand: str = "op") -> Any:
    o = _op(instr, op, operand)
    if o.kind != "binary":
        raise fail(instr, f"{operand}={o!r} is not a binary operation (nl.add, nl.multiply, nl.maximum, ...)")
    return o.fn


def _reduce_fn(instr: str, op: Any) -> Any:
    o = _op(instr, op)
    from . import language as nl
    if o.kind == "reduce":
        return o.reduce
    if o.kind == "binary" and o.reduce is not None:
        return o.reduce
    raise fail(instr, f"op={o!r} does not reduce (use nl.add, nl.maximum, nl.minimum, nl.multiply)")


def _scalar_or_column(instr: str, operand: str, v: Any, data: NkiTensor) -> Any:
    if isinstance(v, NkiTensor):
        t = _read(instr, operand, v)
        if v.shape[0] != data.shape[0] or _free_elems(v) != 1:
            raise fail(instr, f"{operand} '{v.name}' has shape {v.shape}; a per-partition operand has shape "
                       f"({data.shape[0]}, 1)")
        return t.reshape((data.shape[0],) + (1,) * (data.ndim - 1))
    return float(v)


def _math_class(*dtypes: torch.dtype) -> str:
    if any(d.itemsize >= 4 for d in dtypes):
        return "float32"
    if all(d.itemsize == 1 for d in dtypes):
        return "float8"
    return "bfloat16"


# --- data movement -----------------------------------------------------------------
def dma_copy(dst: NkiTensor, src: NkiTensor, oob_mode: Any = oob_mode.error, dge_mode: Any = None,
             **kwargs: Any) -> None:
    instr = "nisa.dma_copy"
    skip = oob_mode is not None and getattr(oob_mode, "value", oob_mode) == "skip"
    for name, x in (("dst", dst), ("src", src)):
        if not isinstance(x, NkiTensor):
            raise fail(instr, f"{name} is a {type(x).__name__}, expected a tensor")
        if x.buffer is psum:
            raise fail(instr, f"{name} '{x.name}' is in nl.psum, which DMA cannot access",
                       "copy the PSUM tile to SBUF first (nisa.tensor_copy)")
        if x.oob is not None and not skip:
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
    _write(instr, dst, values.reshape(d.shape), ("sbuf", "hbm"))
    launch = _launch.current()
    launch.count("dma")
    nbytes = d.numel() * max(s.dtype.itemsize, d.dtype.itemsize)
    launch.work.dma_bytes += nbytes
    launch.work.hbm_bytes += nbytes * sum(1 for x in (dst, src) if x.buffer.hbm)


def tensor_copy(dst: NkiTensor, src: Optional[NkiTensor] = None, engine: Any = None, dtype: Any = None,
                **kwargs: Any) -> Any:
    if src is None:  # legacy: tensor_copy(src, dtype=...) returns the copy
        from . import language as nl
        out = nl.ndarray(dst.shape, dtype or dst.dtype, sbuf)
        tensor_copy(out, dst, engine=engine)
        return out
    instr = "nisa.tensor_copy"
    eng = _engine_name(engine, "vector")
    _gpsimd_no_psum(instr, eng, ("dst", dst), ("src", src))
    values = _read(instr, "src", src) if src.dtype != dst.dtype or src.buffer is psum else \
        _check_tensor(instr, "src", src, ("sbuf", "psum")).t
    _same_partitions(instr, dst, "dst", src, "src")
    _write(instr, dst, values)
    _launch.current().count(eng, _free_elems(dst))


def memset(dst: NkiTensor, value: Any, engine: Any = None, **kwargs: Any) -> None:
    instr = "nisa.memset"
    eng = _engine_name(engine, "vector")
    _gpsimd_no_psum(instr, eng, ("dst", dst))
    _check_tensor(instr, "dst", dst, ("sbuf", "psum"), whole_write=True)
    _writable(instr, dst)
    dst.t.fill_(value)
    if dst.aux is not None:
        dst.aux.fill_(False)
    _launch.current().count(eng, _free_elems(dst))


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
    cur = _read(instr, "dst", dst)
    v = _read(instr, "value", value) if isinstance(value, NkiTensor) else float(value)
    _write(instr, dst, cur + v)
    _launch.current().count("vector", _free_elems(dst))
    return dst


# --- TensorE -------------------------------------------------------------------------
def nc_matmul(dst: NkiTensor, stationary: Any = None, moving: Any = None, accumulate: Optional[bool] = None,
              **kwargs: Any) -> Any:
    """dst[M, N] (PSUM, fp32) = stationary[K, M]ᵀ · moving[K, N]; K on the partitions.
    accumulate=None: the first write to a PSUM region overwrites it and later
    ones add, until an instruction reads the result."""
    if moving is None:  # legacy: nc_matmul(stationary, moving) returns the product
        from . import language as nl
        s, m = dst, stationary
        out = nl.ndarray((_free_elems(s), _free_elems(m)), nl.float32, psum)
        nc_matmul(out, s, m, accumulate=False)
        return out
    instr = "nisa.nc_matmul"
    lim = _launch.current().limits
    _check_tensor(instr, "stationary", stationary, ("sbuf",), hint="TensorE reads its operands from SBUF")
    _check_tensor(instr, "moving", moving, ("sbuf",), hint="TensorE reads its operands from SBUF")
    # New PSUM needs no uninitialised fill unless the product is added to it (accumulate=True).
    _check_tensor(instr, "dst", dst, ("psum",), hint="TensorE writes its result to PSUM",
                  whole_write=accumulate is not True)
    k = stationary.shape[0]
    if moving.shape[0] != k:
        raise fail(instr, f"partition dimension mismatch: stationary has {k} partitions (K), moving has "
                   f"{moving.shape[0]}", "both operands hold the contraction dimension K on the partitions")
    m_size, n_size = _free_elems(stationary), _free_elems(moving)
    if m_size > lim.stationary_fmax:
        raise fail(instr, f"stationary free size {m_size} exceeds maximum {lim.stationary_fmax}",
                   "tile M by 128")
    n_max = lim.moving_fmax(moving.dtype.itemsize)
    if n_size > n_max:
        raise fail(instr, f"moving free size {n_size} exceeds maximum {n_max} on {lim.profile} "
                   f"({lim.generation})", f"tile N by {n_max}")
    if not (stationary.dtype.is_floating_point and moving.dtype.is_floating_point):
        raise fail(instr, f"operands must be floating point, got stationary {stationary.dtype}, moving {moving.dtype}")
    if dst.t.numel() != m_size * n_size or dst.shape[0] != m_size:
        raise fail(instr, f"dst '{dst.name}' has shape {dst.shape}; the product is ({m_size}, {n_size})")
    _writable(instr, dst)
    s = stationary.t.reshape(k, m_size).float()
    m = moving.t.reshape(k, n_size).float()
    product = (s.t() @ m).reshape(dst.shape)
    if accumulate is None:
        # Add where an accumulation is open; the common cases (none or all) without a select.
        if dst.t.device.type == "meta" or not bool(dst.aux.any()):
            accumulate = False
        elif bool(dst.aux.all()):
            accumulate = True
        else:
            product = product + torch.where(dst.aux, dst.t.float(), torch.zeros((), device=product.device))
    if accumulate and dst.t.dtype == torch.float32:
        dst.t.add_(product)
    elif accumulate:
        dst.t.copy_(product + dst.t.float())
    else:
        dst.t.copy_(product)
    dst.aux.fill_(True)
    launch = _launch.current()
    launch.count("tensor", n_size)
    launch.work.flops[_math_class(stationary.dtype, moving.dtype)] += 2.0 * k * m_size * n_size


def nc_transpose(dst: NkiTensor, data: Any = None, engine: Any = None, **kwargs: Any) -> Any:
    """dst = dataᵀ: on TensorE (SBUF -> PSUM, up to 128x128) or VectorE (up to 32x32)."""
    if data is None:  # legacy: nc_transpose(data, engine=...) returns the transpose
        from . import language as nl
        src = dst
        eng = _engine_name(engine, "tensor" if max(src.shape) > 32 or src.buffer is sbuf else "vector")
        out = nl.ndarray((src.shape[1], src.shape[0]), src.dtype if eng == "vector" else nl.float32,
                         psum if eng == "tensor" else sbuf)
        nc_transpose(out, src, engine=eng)
        return out
    instr = "nisa.nc_transpose"
    lim = _launch.current().limits
    eng = _engine_name(engine, "tensor" if dst.buffer is psum and data.buffer is sbuf else "vector")
    if data.ndim != 2 and _free_elems(data) * data.shape[0] != data.t.numel():
        raise fail(instr, f"data must be a 2-D tile, got {data.shape}")
    p, f = data.shape[0], _free_elems(data)
    if eng == "tensor":
        _check_tensor(instr, "data", data, ("sbuf",), hint="a TensorE transpose reads SBUF")
        _check_tensor(instr, "dst", dst, ("psum",), hint="a TensorE transpose writes PSUM")
        limit = lim.pe_transpose_max
    elif eng == "vector":
        _check_tensor(instr, "data", data, ("sbuf", "psum"))
        limit = lim.vector_transpose_max
    else:
        raise fail(instr, f"engine {eng} cannot transpose", "use nisa.engine.tensor or nisa.engine.vector")
    if p > limit or f > limit:
        raise fail(instr, f"data {data.shape} exceeds the {limit}x{limit} transpose of the {eng} engine")
    values = _read(instr, "data", data).reshape(p, f).t()
    _write(instr, dst, values)
    launch = _launch.current()
    launch.count(eng, f if eng == "vector" else p)
    if eng == "tensor":
        launch.work.flops[_math_class(data.dtype)] += 2.0 * p * p * f  # an identity matmul


# --- ScalarE ---------------------------------------------------------------------------
def activation(dst: Any, op: Any = None, data: Any = None, bias: Any = None, scale: Any = 1.0,
               reduce_op: Any = None, reduce_res: Optional[NkiTensor] = None, reduce_cmd: Any = reduce_cmd.idle,
               engine: Any = None, dtype: Any = None, **kwargs: Any) -> Any:
    """dst = op(data * scale + bias), with an optional add-reduce along the free
    axes into reduce_res (through the engine's per-partition registers)."""
    if not isinstance(dst, NkiTensor):  # legacy: activation(op, data, bias=, scale=) returns the result
        from . import language as nl
        op, data = dst, op
        out = nl.ndarray(data.shape, dtype or data.dtype, sbuf)
        activation(out, op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
                   reduce_cmd=reduce_cmd if reduce_res is None or reduce_cmd != globals()["reduce_cmd"].idle
                   else globals()["reduce_cmd"].reset_reduce)
        return out
    instr = "nisa.activation"
    fn = _op(instr, op)
    if fn.kind != "unary":
        raise fail(instr, f"op={fn!r} is not an activation function (nl.exp, nl.tanh, nl.copy, ...)")
    x = _read(instr, "data", data)
    _same_partitions(instr, dst, "dst", data, "data")
    y = x * _scalar_or_column(instr, "scale", scale, data)
    if bias is not None:
        y = y + _scalar_or_column(instr, "bias", bias, data)
    y = fn.fn(y)
    _write(instr, dst, y)
    launch = _launch.current()
    cmd = getattr(reduce_cmd, "value", reduce_cmd)
    if reduce_res is not None or cmd != "idle":
        if reduce_op is not None and _op(instr, reduce_op, "reduce_op").name != "add":
            raise fail(instr, f"reduce_op={reduce_op!r}: the Scalar Engine's registers only add",
                       "reduce with nisa.tensor_reduce for max/min")
        p = data.shape[0]
        regs = getattr(launch, "reduce_regs", None)
        if regs is None or regs.shape[0] < p:
            regs = launch.reduce_regs = torch.zeros(launch.limits.pmax, device=y.device)
        if cmd in ("reset", "reset_reduce"):
            regs[:p] = 0
        if cmd in ("reduce", "reset_reduce") or (reduce_res is not None and cmd == "idle"):
            regs[:p] += y.reshape(p, -1).sum(1)
        if reduce_res is not None:
            if reduce_res.shape[0] != p or _free_elems(reduce_res) != 1:
                raise fail(instr, f"reduce_res '{reduce_res.name}' has shape {reduce_res.shape}; it holds one "
                           f"value per partition: ({p}, 1)")
            _write(instr, reduce_res, regs[:p].reshape(reduce_res.shape), operand="reduce_res")
    launch.count(_engine_name(engine, "scalar"), _free_elems(data))


def activation_reduce(dst: NkiTensor, op: Any, data: NkiTensor, reduce_op: Any, reduce_res: NkiTensor,
                      bias: Any = None, scale: Any = 1.0, **kwargs: Any) -> None:
    activation(dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
               reduce_cmd=reduce_cmd.reset_reduce)


# --- VectorE / GpSimd --------------------------------------------------------------------
def tensor_tensor(dst: Any, data1: Any = None, data2: Any = None, op: Any = None, engine: Any = None,
                  dtype: Any = None, **kwargs: Any) -> Any:
    if op is None and data2 is not None and not isinstance(data2, NkiTensor):
        # legacy: tensor_tensor(data1, data2, op) returns the result
        from . import language as nl
        d1, d2, o = dst, data1, data2
        out = nl.ndarray(d1.shape, dtype or nl._result_dtype(d1, d2), sbuf)
        tensor_tensor(out, d1, d2, o, engine=engine)
        return out
    instr = "nisa.tensor_tensor"
    eng = _engine_name(engine, "vector")
    fn = _binary_fn(instr, op)
    _check_tensor(instr, "data1", data1, ("sbuf", "psum"))
    _check_tensor(instr, "data2", data2, ("sbuf", "psum"))
    if data1.buffer is psum and data2.buffer is psum:
        raise fail(instr, f"data1 '{data1.name}' and data2 '{data2.name}' are both in nl.psum; at most one "
                   "operand may be read from PSUM", "copy one of them to SBUF first")
    _gpsimd_no_psum(instr, eng, ("dst", dst), ("data1", data1), ("data2", data2))
    _same_partitions(instr, data1, "data1", data2, "data2")
    if _free_elems(data1) != _free_elems(data2):
        raise fail(instr, f"data1 {data1.shape} and data2 {data2.shape} differ in free size")
    a = _read(instr, "data1", data1)
    b = _read(instr, "data2", data2)
    if b.shape != a.shape:
        b = b.reshape(a.shape)
    _write(instr, dst, fn(a, b))
    _launch.current().count(eng, _free_elems(data1))


def tensor_scalar(dst: Any, data: Any = None, op0: Any = None, operand0: Any = None, reverse0: bool = False,
                  op1: Any = None, operand1: Any = None, reverse1: bool = False, engine: Any = None,
                  dtype: Any = None, **kwargs: Any) -> Any:
    """dst = (data op0 operand0) op1 operand1; an operand is a scalar or a (P, 1) tile."""
    if isinstance(dst, NkiTensor) and not isinstance(data, NkiTensor) and data is not None:
        # legacy: tensor_scalar(data, op0, operand0, ...) returns the result
        from . import language as nl
        src = dst
        out = nl.ndarray(src.shape, dtype or src.dtype, sbuf)
        tensor_scalar(out, src, data, op0, reverse0=reverse0 if isinstance(reverse0, bool) else False,
                      op1=op1, operand1=operand1, reverse1=reverse1, engine=engine)
        return out
    instr = "nisa.tensor_scalar"
    eng = _engine_name(engine, "vector")
    _gpsimd_no_psum(instr, eng, ("dst", dst), ("data", data))
    x = _read(instr, "data", data)
    _same_partitions(instr, dst, "dst", data, "data")
    f0 = _binary_fn(instr, op0, "op0")
    v0 = _scalar_or_column(instr, "operand0", operand0, data)
    y = f0(_as(v0, x), x) if reverse0 else f0(x, _as(v0, x))
    if op1 is not None:
        f1 = _binary_fn(instr, op1, "op1")
        v1 = _scalar_or_column(instr, "operand1", operand1, data)
        y = f1(_as(v1, y), y) if reverse1 else f1(y, _as(v1, y))
    _write(instr, dst, y)
    _launch.current().count(eng, _free_elems(data))


def _as(v: Any, like: torch.Tensor) -> torch.Tensor:
    return v if isinstance(v, torch.Tensor) else torch.tensor(v, dtype=like.dtype, device=like.device)


def tensor_reduce(dst: Any, op: Any = None, data: Any = None, axis: Any = None, negate: bool = False,
                  keepdims: bool = False, engine: Any = None, dtype: Any = None, **kwargs: Any) -> Any:
    if not isinstance(dst, NkiTensor):  # legacy: tensor_reduce(op, data, axis, ...) returns the result
        from . import language as nl
        o, src, ax = dst, op, data if data is not None else axis
        dims = _free_axes("nisa.tensor_reduce", ax, src)
        shape = tuple(1 if i in dims else s for i, s in enumerate(src.shape)) if keepdims else \
            tuple(s for i, s in enumerate(src.shape) if i not in dims)
        out = nl.ndarray(shape if len(shape) > 1 else (src.shape[0], 1), dtype or src.dtype, sbuf)
        tensor_reduce(out, o, src, ax, negate=negate, keepdims=keepdims, engine=engine)
        return out
    instr = "nisa.tensor_reduce"
    eng = _engine_name(engine, "vector")
    _gpsimd_no_psum(instr, eng, ("dst", dst), ("data", data))
    red = _reduce_fn(instr, op)
    dims = _free_axes(instr, axis, data)
    x = _read(instr, "data", data)
    y = red(x, dims, keepdims)
    if negate:
        y = -y
    _same_partitions(instr, dst, "dst", data, "data")
    _write(instr, dst, y)
    _launch.current().count(eng, _free_elems(data))


def _pattern_values(instr: str, dst: NkiTensor, pattern: Any, offset: Any, channel_multiplier: Any) -> torch.Tensor:
    try:
        steps = [(int(s), int(n)) for s, n in pattern]
    except (TypeError, ValueError):
        raise fail(instr, f"pattern {pattern!r} is not a list of [step, num] pairs") from None
    if len(steps) > 4:
        raise fail(instr, f"pattern has {len(steps)} dimensions; at most 4")
    count = math.prod(n for _, n in steps)
    if count != _free_elems(dst):
        raise fail(instr, f"pattern covers {count} elements per partition, dst '{dst.name}' {dst.shape} has "
                   f"{_free_elems(dst)}")
    dev = dst.t.device
    p = dst.shape[0]
    values = torch.full((p, 1), int(offset), dtype=torch.int64, device=dev)
    values = values + torch.arange(p, device=dev).reshape(p, 1) * int(channel_multiplier)
    flat = torch.zeros((1, 1), dtype=torch.int64, device=dev)
    for step, num in steps:
        flat = (flat.unsqueeze(-1) + step * torch.arange(num, device=dev)).reshape(1, -1)
    return values + flat


def iota(dst: NkiTensor, pattern: Any = None, offset: Any = 0, channel_multiplier: Any = 0,
         **kwargs: Any) -> None:
    """dst[p, i...] = offset + p * channel_multiplier + Σ step_k · i_k (GpSimd, into SBUF)."""
    instr = "nisa.iota"
    if pattern is None:
        raise legacy("nisa.iota(expr, dtype)", "nisa.iota(dst, pattern=[[step, num], ...], offset, "
                     "channel_multiplier)")
    _check_tensor(instr, "dst", dst, ("sbuf",), hint="iota writes SBUF")
    _write(instr, dst, _pattern_values(instr, dst, pattern, offset, channel_multiplier))
    _launch.current().count("gpsimd", _free_elems(dst))


def affine_select(dst: NkiTensor, pattern: Any = None, offset: Any = 0, channel_multiplier: Any = 0,
                  on_true_tile: Optional[NkiTensor] = None, on_false_value: Any = 0.0, cmp_op: Any = None,
                  **kwargs: Any) -> None:
    """dst = on_true_tile where cmp_op(offset + p·channel_multiplier + Σ step_k·i_k, 0), else
    on_false_value (GpSimd): the causal mask of attention."""
    instr = "nisa.affine_select"
    if on_true_tile is None or not isinstance(dst, NkiTensor):
        raise legacy("nisa.affine_select(pred, on_true_tile, on_false_value)",
                     "nisa.affine_select(dst, pattern, offset, channel_multiplier, on_true_tile, on_false_value, "
                     "cmp_op=nl.greater_equal)")
    from . import language as nl
    cmp = _binary_fn(instr, cmp_op if cmp_op is not None else nl.equal, "cmp_op")
    _gpsimd_no_psum(instr, "gpsimd", ("dst", dst), ("on_true_tile", on_true_tile))
    x = _read(instr, "on_true_tile", on_true_tile)
    _same_partitions(instr, dst, "dst", on_true_tile, "on_true_tile")
    affine = _pattern_values(instr, dst, pattern, offset, channel_multiplier).reshape(x.shape)
    keep = cmp(affine, torch.zeros((), dtype=affine.dtype, device=affine.device))
    _write(instr, dst, torch.where(keep, x, torch.tensor(float(on_false_value), device=x.device)))
    _launch.current().count("gpsimd", _free_elems(dst) + 150)  # a fixed setup of ~150 cycles


def range_select(dst: NkiTensor, on_true_tile: NkiTensor, comp_op0: Any, comp_op1: Any, bound0: Any, bound1: Any,
                 reduce_cmd: Any = reduce_cmd.reset_reduce, reduce_res: Optional[NkiTensor] = None,
                 reduce_op: Any = None, range_start: Any = 0, on_false_value: Any = Ellipsis,
                 **kwargs: Any) -> None:
    """dst = on_true_tile where comp_op0(i + range_start, bound0) and comp_op1(i + range_start, bound1)
    (i: the free index), else on_false_value; optional max-reduce into reduce_res (VectorE, NeuronCore-v3+)."""
    instr = "nisa.range_select"
    lim = _launch.current().limits
    if lim.generation == "gen2":
        raise fail(instr, "available only on NeuronCore-v3 and newer; the profile is trn1 (NeuronCore-v2)",
                   "use nisa.affine_select")
    x = _read(instr, "on_true_tile", on_true_tile)
    _same_partitions(instr, dst, "dst", on_true_tile, "on_true_tile")
    p = x.shape[0]
    idx = (torch.arange(_free_elems(on_true_tile), device=x.device, dtype=torch.float32)
           + float(range_start)).reshape(1, -1)
    b0 = _scalar_or_column(instr, "bound0", bound0, on_true_tile)
    b1 = _scalar_or_column(instr, "bound1", bound1, on_true_tile)
    b0 = b0.reshape(p, 1) if isinstance(b0, torch.Tensor) else b0
    b1 = b1.reshape(p, 1) if isinstance(b1, torch.Tensor) else b1
    keep = _binary_fn(instr, comp_op0, "comp_op0")(idx, _as(b0, idx)) & \
        _binary_fn(instr, comp_op1, "comp_op1")(idx, _as(b1, idx))
    fill = -3.4028234663852886e38 if on_false_value is Ellipsis else float(on_false_value)
    y = torch.where(keep, x.reshape(p, -1), torch.tensor(fill, device=x.device))
    _write(instr, dst, y)
    if reduce_res is not None:
        if reduce_op is not None and _op(instr, reduce_op, "reduce_op").name not in ("maximum", "max"):
            raise fail(instr, f"reduce_op={reduce_op!r}: range_select reduces with nl.maximum only")
        _write(instr, reduce_res, y.amax(1, keepdim=True), operand="reduce_res")
    _launch.current().count("vector", _free_elems(on_true_tile))
