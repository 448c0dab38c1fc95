"""assert_parity: run a function on CPU and on `neuron` from the same inputs
and compare what comes out (outputs, mutated inputs, and with grad=True the
gradients of the inputs and of a module's parameters).

Inputs are mirrored onto the device with their exact layout (sizes,
strides, storage offset), so a transposed, sliced or expanded CPU tensor
reaches the neuron kernel transposed, sliced or expanded.
"""
from __future__ import annotations

import copy
import traceback
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

import torch
from torch.utils._pytree import tree_flatten, tree_map

from ..execution import dtype_policy, native_ops
from .op_checks import fallback_snapshot, fallbacks_since

# ---- tolerances ------------------------------------------------------------
# (rtol, atol) per dtype. The native path runs the very CPU kernel on arena
# memory, so equal dtypes usually give equal bits; the margins cover kernels
# whose vectorised reduction order depends on alignment and length.
_TOLERANCE = {
    # torch.testing's float32 default: reassociated fp32 sums differ by a few ulp.
    torch.float32: (1.3e-6, 1e-5),
    # bf16 has 8 mantissa bits: one rounding step is 2**-8 ~ 4e-3 relative;
    # kernels accumulate in fp32 and round once, reassociation can flip it.
    torch.bfloat16: (1.6e-2, 1e-5),
    # fp16 has 11 mantissa bits: one rounding step ~ 1e-3 relative.
    torch.float16: (1e-3, 1e-5),
    # float64 computed exactly (NEURON_SIM_DTYPE_POLICY=exact, or a fallback op).
    torch.float64: (1e-7, 1e-7),
    torch.complex64: (1.3e-6, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}
# The 64-bit rule (docs/semantics.md): native ops compute float64 in float32 and cast
# back, so a float64 result carries float32 rounding against a true float64
# CPU result: a few fp32 ulp per operation, accumulated over short sums.
_FLOAT64_AS_FLOAT32 = (2e-5, 1e-5)
# Gradients pass through several kernels (forward, backward, accumulation):
# allow a few more roundings than a single output.
_GRAD_FACTOR = 4.0


def dtype_rule_active() -> bool:
    """Whether native ops emulate Trainium's 64-bit rule (float64 computed in
    float32, int64 in int32). NEURON_SIM_DTYPE_POLICY=exact turns it off."""
    return dtype_policy.get_dtype_policy() != "exact"


def tolerance(dtype: torch.dtype, grad: bool = False) -> tuple[float, float]:
    """(rtol, atol) assert_parity uses for `dtype`. Integers and bool compare
    exactly: int64 under the 64-bit rule is computed in int32, which is exact
    while values fit (the strategies keep them in range)."""
    if not (dtype.is_floating_point or dtype.is_complex):
        return (0.0, 0.0)
    rtol, atol = _TOLERANCE.get(dtype, (1.3e-6, 1e-5))
    if dtype == torch.float64 and dtype_rule_active():
        rtol, atol = _FLOAT64_AS_FLOAT32
    if grad:
        rtol, atol = rtol * _GRAD_FACTOR, atol * _GRAD_FACTOR
    return rtol, atol


# ---- moving inputs ------------------------------------------------------------
def mirror(t: torch.Tensor, device: str | torch.device) -> torch.Tensor:
    """A copy of `t` on `device` with t's exact layout: sizes, strides (0 too)
    and storage offset over a copy of its whole storage."""
    if t.layout != torch.strided or t.is_conj() or t.is_neg():
        return t.detach().clone().to(device)
    t = t.detach()
    n = t.untyped_storage().nbytes() // t.element_size()
    whole = torch.empty(0, dtype=t.dtype, device=t.device).set_(t.untyped_storage(), 0, (n,), (1,))
    copied = whole.to(device, copy=True)
    return copied.as_strided(t.size(), t.stride(), t.storage_offset())


def _is_tensor(x: Any) -> bool:
    return isinstance(x, torch.Tensor)


def _differentiable(t: torch.Tensor) -> bool:
    return t.dtype.is_floating_point or t.dtype.is_complex


# ---- execution paths -----------------------------------------------------------
PATHS = ("table", "fallback", "native")


@contextmanager
def execution_path(path: str, ops: Iterable[str] = ()) -> Iterator[None]:
    """Runs the block with ops routed one way:
    "table"    - the native-op table in use (as on the real device);
    "fallback" - every op takes the tracked CPU fallback;
    "native"   - the table plus `ops` (e.g. ops seen falling back) run natively.
    """
    if path not in PATHS:
        raise ValueError(f"execution path {path!r}: use one of {PATHS}")
    if path == "table":
        yield
        return
    names = [] if path == "fallback" else native_ops.current() + list(ops)
    with native_ops.override(names):  # registers direct kernels for ops made native, as load() does
        yield


# ---- running one side --------------------------------------------------------------
class _Run:
    def __init__(self, device: str):
        self.device = device
        self.outputs: list[Any] = []
        self.inputs: list[torch.Tensor] = []
        self.grads: list[torch.Tensor | None] = []
        self.param_grads: dict[str, torch.Tensor | None] = {}
        self.state: dict[str, Any] = {}
        self.error: BaseException | None = None
        self.error_trace = ""


def _run(fn: Callable, args: tuple, kwargs: dict, device: str, grad: bool,
         cotangent_seed: int, grad_argnums: tuple[int, ...] | None) -> _Run:
    run = _Run(device)
    (args_d, kwargs_d) = tree_map(lambda x: mirror(x, device) if _is_tensor(x) else x, (args, kwargs))
    leaves = [x for x in tree_flatten((args_d, kwargs_d))[0] if _is_tensor(x)]
    if grad:
        wanted = leaves if grad_argnums is None else [
            x for i in grad_argnums for x in tree_flatten(args_d[i])[0] if _is_tensor(x)]
        for t in wanted:
            if _differentiable(t):
                t.requires_grad_(True)
    # Modules (as fn, or among the positional args) get a deep copy per side.
    modules: list[tuple[str, torch.nn.Module]] = []
    if isinstance(fn, torch.nn.Module):
        fn = copy.deepcopy(fn).to(device)
        modules.append(("", fn))
    if any(isinstance(a, torch.nn.Module) for a in args_d):
        args_d = tuple(copy.deepcopy(a).to(device) if isinstance(a, torch.nn.Module) else a for a in args_d)
        modules += [(f"arg{i}.", a) for i, a in enumerate(args_d) if isinstance(a, torch.nn.Module)]
    try:
        out = fn(*args_d, **kwargs_d)
        flat_out = tree_flatten(out)[0]
        if grad:
            diff = [o for o in flat_out if _is_tensor(o) and o.requires_grad]
            if diff:
                g = torch.Generator().manual_seed(cotangent_seed)
                cot = [mirror(torch.randn(o.shape, generator=g, dtype=torch.float64).to(o.dtype), device)
                       for o in diff]
                torch.autograd.backward(diff, cot)
    except Exception as e:  # compared with the other side's error
        # Kept without its traceback: that would hold this frame, and with it
        # every device tensor of the run, in a reference cycle (run -> error
        # -> traceback -> frame -> run). The text is kept for the report.
        run.error_trace = traceback.format_exc()
        run.error = e.with_traceback(None)
        return run
    run.outputs = [o.detach() if _is_tensor(o) else o for o in flat_out]
    run.inputs = [t.detach() for t in leaves]
    run.grads = [t.grad if t.requires_grad else None for t in leaves] if grad else []
    for prefix, module in modules:
        # Buffers (running stats) and parameters after the call.
        run.state.update({prefix + n: v.detach() for n, v in module.state_dict().items()})
        if grad:
            run.param_grads.update({prefix + n: p.grad for n, p in module.named_parameters()})
    return run


# ---- comparing -------------------------------------------------------------------
def _compare(cpu: Any, dev: Any, what: str, rtol: float | None, atol: float | None, grad: bool,
             check_device: bool) -> None:
    if _is_tensor(cpu) != _is_tensor(dev):
        raise AssertionError(f"{what}: CPU gave {type(cpu).__name__}, neuron gave {type(dev).__name__}")
    if not _is_tensor(cpu):
        if isinstance(cpu, float) and isinstance(dev, float) and cpu != cpu and dev != dev:
            return  # both nan
        if cpu != dev:
            raise AssertionError(f"{what}: CPU gave {cpu!r}, neuron gave {dev!r}")
        return
    if check_device and cpu.device.type == "cpu" and dev.device.type != "neuron":
        raise AssertionError(f"{what}: the neuron run returned a tensor on {dev.device}, not on neuron")
    if cpu.dtype != dev.dtype:
        raise AssertionError(f"{what}: dtype differs: CPU {cpu.dtype}, neuron {dev.dtype}")
    if cpu.shape != dev.shape:
        raise AssertionError(f"{what}: shape differs: CPU {tuple(cpu.shape)}, neuron {tuple(dev.shape)}")
    r, a = tolerance(cpu.dtype, grad)
    r = r if rtol is None else rtol
    a = a if atol is None else atol
    try:
        torch.testing.assert_close(dev.cpu(), cpu, rtol=r, atol=a, equal_nan=True, check_device=False,
                                   check_stride=False, check_layout=False)
    except AssertionError as e:
        raise AssertionError(f"{what} ({cpu.dtype}, rtol={r}, atol={a}):\n{e}") from None


def _compare_runs(ref: _Run, dev: _Run, label: str, rtol, atol, check_device: bool) -> None:
    if ref.error is not None or dev.error is not None:
        if ref.error is None:
            raise AssertionError(f"[{label}] neuron raised but CPU did not: "
                                 f"{type(dev.error).__name__}: {dev.error}\n{dev.error_trace}") from dev.error
        if dev.error is None:
            raise AssertionError(f"[{label}] CPU raised {type(ref.error).__name__} ({ref.error}) "
                                 "but neuron did not")
        if type(ref.error) is not type(dev.error):
            raise AssertionError(f"[{label}] CPU raised {type(ref.error).__name__} ({ref.error}), neuron "
                                 f"raised {type(dev.error).__name__} ({dev.error})\n{dev.error_trace}") from dev.error
        return
    if len(ref.outputs) != len(dev.outputs):
        raise AssertionError(f"[{label}] CPU returned {len(ref.outputs)} values, neuron {len(dev.outputs)}")
    for i, (c, d) in enumerate(zip(ref.outputs, dev.outputs)):
        _compare(c, d, f"[{label}] output {i}", rtol, atol, False, check_device)
    for i, (c, d) in enumerate(zip(ref.inputs, dev.inputs)):
        _compare(c, d, f"[{label}] input {i} after the call (mutated in place?)", rtol, atol, False, False)
    for i, (c, d) in enumerate(zip(ref.grads, dev.grads)):
        if (c is None) != (d is None):
            raise AssertionError(f"[{label}] grad of input {i}: CPU {'None' if c is None else 'a tensor'}, "
                                 f"neuron {'None' if d is None else 'a tensor'}")
        if c is not None:
            _compare(c, d, f"[{label}] grad of input {i}", rtol, atol, True, check_device)
    for name, c in ref.state.items():
        _compare(c, dev.state[name], f"[{label}] module state {name!r} after the call", rtol, atol, False, False)
    for name, c in ref.param_grads.items():
        d = dev.param_grads.get(name)
        if (c is None) != (d is None):
            raise AssertionError(f"[{label}] grad of parameter {name!r}: present on one side only")
        if c is not None:
            _compare(c, d, f"[{label}] grad of parameter {name!r}", rtol, atol, True, check_device)


def assert_parity(fn: Callable, *args: Any, grad: bool = False, path: str = "table",
                  rtol: float | None = None, atol: float | None = None, device: str = "neuron",
                  check_device: bool = True, allow_errors: bool = True,
                  grad_argnums: tuple[int, ...] | None = None, **kwargs: Any) -> None:
    """Asserts `fn(*args, **kwargs)` gives on `device` what it gives on CPU.

    Tensors among args/kwargs (nested in lists, tuples and dicts too) are CPU
    tensors; each side gets its own copy with the same layout. `fn` may be an
    nn.Module: each side gets a deep copy. Compared: every output (dtype,
    shape, values; nan equals nan), every input tensor after the call (so
    in-place ops are checked), and with grad=True the gradients of the
    floating-point inputs and of the module's parameters, from the same
    random cotangents. If CPU raises, neuron must raise the same exception type.

    path: "table" runs with the native-op table in use; "both" also runs
    the ops with the paths swapped: once with every op on the tracked
    fallback, once with the ops that fell back forced native, so a kernel is
    checked on the path the real device takes and on the other one.
    rtol/atol override the per-dtype tolerances (see `tolerance`).
    grad_argnums: the positional arguments to differentiate (default: every
    floating-point tensor), e.g. to leave batch norm's running stats alone.
    allow_errors=False fails when the CPU run raises (the inputs are then not
    exercising the op at all).
    """
    if path not in ("table", "both", *PATHS):
        raise ValueError(f"path={path!r}: use 'table', 'both', 'fallback' or 'native'")
    cotangent_seed = 0x5EED
    ref = _run(fn, args, kwargs, "cpu", grad, cotangent_seed, grad_argnums)
    if ref.error is not None and not allow_errors:
        raise AssertionError(f"the CPU reference raised {type(ref.error).__name__}: {ref.error}\n"
                             f"{ref.error_trace}") from ref.error
    before = fallback_snapshot()
    with execution_path("fallback" if path == "fallback" else "table"):
        dev = _run(fn, args, kwargs, device, grad, cotangent_seed, grad_argnums)
    _compare_runs(ref, dev, "fallback" if path == "fallback" else "table", rtol, atol, check_device)
    if path in ("both", "native"):
        fell = list(fallbacks_since(before))
        if fell or path == "native":
            with execution_path("native", fell):
                dev = _run(fn, args, kwargs, device, grad, cotangent_seed, grad_argnums)
            _compare_runs(ref, dev, "native: " + (", ".join(sorted(fell)) or "table"), rtol, atol, check_device)
    if path == "both":
        with execution_path("fallback"):
            dev = _run(fn, args, kwargs, device, grad, cotangent_seed, grad_argnums)
        _compare_runs(ref, dev, "fallback", rtol, atol, check_device)
