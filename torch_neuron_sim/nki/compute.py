"""The ScalarE, VectorE and GpSimd instructions of nki.isa (activation,
tensor_tensor, tensor_tensor_scan, tensor_scalar, tensor_reduce, iota, affine_select,
range_select), destination first; nki.isa re-exports them."""
from __future__ import annotations

import enum
import math
from typing import Any, Optional, Sequence

import torch

from . import launch as _launch
from . import ops as _ops
from .errors import legacy
from .launch import fail
from .memory import NkiTensor, allocate, psum, sbuf
from .operands import (
    _SPACE_NAMES,
    _as,
    _binary_fn,
    _check_tensor,
    _engine_name,
    _free_axes,
    _free_elems,
    _gpsimd_no_psum,
    _math_class,
    _op,
    _read,
    _reduce_fn,
    _same_partitions,
    _scalar_or_column,
    _values,
    _space,
    _writable,
    _write,
    dge_mode,
    engine,
    get_nc_version,
    nc_version,
    oob_mode,
    reduce_cmd,
)


# --- ScalarE ---------------------------------------------------------------------------
def activation(dst: Any = None, op: Any = None, data: Any = None, bias: Any = None, scale: Any = 1.0,
               reduce_op: Any = None, reduce_res: Optional[NkiTensor] = None, reduce_cmd: Any = reduce_cmd.idle,
               engine: Any = None, dtype: Any = None, **kwargs: Any) -> Any:
    """dst = op(data * scale + bias), with an optional add-reduce along the free
    axes into reduce_res (through the engine's per-partition registers)."""
    if not isinstance(dst, NkiTensor):  # legacy: activation(op, data, bias=, scale=) returns the result
        if dst is not None:  # the op given positionally
            op, data = (dst, op) if data is None else (dst, data)
        out = allocate(data.shape, dtype or data.dtype, sbuf)
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
    sc = _scalar_or_column(instr, "scale", scale, data)
    y = x if isinstance(sc, float) and sc == 1.0 else x * sc  # x * 1.0 is x exactly: no pass for it
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
        p = data.t.shape[0]
        regs = getattr(launch, "reduce_regs", None)
        if regs is None or regs.shape[0] < p:
            regs = launch.reduce_regs = torch.zeros(launch.limits.pmax, device=y.device)
        if cmd in ("reset", "reset_reduce"):
            regs[:p] = 0
        if cmd in ("reduce", "reset_reduce") or (reduce_res is not None and cmd == "idle"):
            regs[:p] += y.reshape(p, -1).sum(1)
        if reduce_res is not None:
            if reduce_res.t.shape[0] != p or _free_elems(reduce_res) != 1:
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
    if (op is None and data2 is not None and not isinstance(data2, NkiTensor)) or (data2 is None and op is not None):
        # legacy: tensor_tensor(data1, data2, op) or tensor_tensor(data1, data2, op=op) returns the result
        d1, d2, o = (dst, data1, data2) if op is None else (dst, data1, op)
        out = allocate(d1.shape, dtype or _ops.result_dtype(d1, d2), sbuf)
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
    free = _free_elems(data1)
    if free != _free_elems(data2):
        raise fail(instr, f"data1 {data1.shape} and data2 {data2.shape} differ in free size")
    a, b = _values(data1), _values(data2)  # both checked above
    if b.shape != a.shape:
        b = b.reshape(a.shape)
    _write(instr, dst, fn(a, b))
    _launch.current().count(eng, free)


def tensor_tensor_scan(dst: Any, data0: Any = None, data1: Any = None, initial: Any = None, op0: Any = None,
                       op1: Any = None, reverse0: bool = False, reverse1: bool = False, engine: Any = None,
                       dtype: Any = None, **kwargs: Any) -> Any:
    """A scan along the free axis of each partition: r[:, 0] = op1(op0(data0[:, 0], initial),
    data1[:, 0]), r[:, i] = op1(op0(data0[:, i], r[:, i-1]), data1[:, i]) (reverse swaps an
    op's operands). `initial`: a scalar or one value per partition. On VectorE; the carried
    value stays fp32 and the result is rounded once, to dst's dtype."""
    if data1 is None:  # legacy: tensor_tensor_scan(data0, data1, initial, op0, op1) returns the result
        d0, d1 = dst, data0
        out = allocate(d0.shape, dtype or _ops.result_dtype(d0, d1), sbuf)
        tensor_tensor_scan(out, d0, d1, initial, op0, op1, reverse0=reverse0, reverse1=reverse1, engine=engine)
        return out
    instr = "nisa.tensor_tensor_scan"
    f0, f1 = _binary_fn(instr, op0, "op0"), _binary_fn(instr, op1, "op1")
    _check_tensor(instr, "data0", data0, ("sbuf", "psum"))
    _check_tensor(instr, "data1", data1, ("sbuf", "psum"))
    if data0.buffer is psum and data1.buffer is psum:
        raise fail(instr, f"data0 '{data0.name}' and data1 '{data1.name}' are both in nl.psum; at most one "
                   "operand may be read from PSUM", "copy one of them to SBUF first")
    _same_partitions(instr, data0, "data0", data1, "data1")
    _same_partitions(instr, dst, "dst", data0, "data0")
    free = _free_elems(data0)
    if free != _free_elems(data1):
        raise fail(instr, f"data0 {data0.shape} and data1 {data1.shape} differ in free size")
    if initial is None:
        raise fail(instr, "initial is required: a scalar or a tile of one value per partition")
    p = data0.t.shape[0]
    a, b = _values(data0).reshape(p, free), _values(data1).reshape(p, free)
    init = _scalar_or_column(instr, "initial", initial, data0)
    prev = init.reshape(p) if isinstance(init, torch.Tensor) else torch.full((p,), init, device=a.device)
    out = torch.empty_like(a)
    if a.device.type != "meta":  # shapes only: nothing to compute
        for i in range(free):  # a true recurrence: each column needs the one before
            x = f0(prev, a[:, i]) if reverse0 else f0(a[:, i], prev)
            prev = out[:, i] = f1(b[:, i], x) if reverse1 else f1(x, b[:, i])
    _write(instr, dst, out.reshape(data0.t.shape))
    _launch.current().count(_engine_name(engine, "vector"), free)


def tensor_scalar(dst: Any, data: Any = None, op0: Any = None, operand0: Any = None, reverse0: bool = False,
                  op1: Any = None, operand1: Any = None, reverse1: bool = False, engine: Any = None,
                  dtype: Any = None, **kwargs: Any) -> Any:
    """dst = (data op0 operand0) op1 operand1; an operand is a scalar or a (P, 1) tile."""
    if isinstance(dst, NkiTensor) and not isinstance(data, NkiTensor) and data is not None:
        # legacy: tensor_scalar(data, op0, operand0, ...) returns the result
        src = dst
        out = allocate(src.shape, dtype or src.dtype, sbuf)
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


def tensor_reduce(dst: Any, op: Any = None, data: Any = None, axis: Any = None, negate: bool = False,
                  keepdims: bool = False, engine: Any = None, dtype: Any = None, **kwargs: Any) -> Any:
    if not isinstance(dst, NkiTensor):  # legacy: tensor_reduce(op, data, axis, ...) returns the result
        o, src, ax = dst, op, data if data is not None else axis
        dims = _free_axes("nisa.tensor_reduce", ax, src)
        shape = tuple(1 if i in dims else s for i, s in enumerate(src.shape)) if keepdims else \
            tuple(s for i, s in enumerate(src.shape) if i not in dims)
        out = allocate(shape if len(shape) > 1 else (src.shape[0], 1), dtype or src.dtype, sbuf)
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
    cmp = _binary_fn(instr, cmp_op if cmp_op is not None else _ops.REGISTRY["equal"], "cmp_op")
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
