"""Running one launch of a kernel (@nki.jit is jit.py).

A launch binds the arguments to the kernel's parameters (tensors become HBM
tensors, everything else is a compile-time constant), runs the kernel body
once per point of the grid with nl.program_id set (one instance after
another, as AWS's simulator does), and turns what the kernel returns back
into the caller's tensors. The engines' work of all instances is the
launch's, for the cost model."""
from __future__ import annotations

import inspect
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

import torch

from . import launch as _launch
from .errors import NKIError
from .launch import fail
from .limits import Limits, active_limits
from .memory import NkiTensor, argument, marks


def _grid(grid: Any) -> tuple:
    if grid is None:
        return ()
    items = grid if isinstance(grid, (tuple, list)) else (grid,)
    out = []
    for g in items:
        try:
            n = int(g)
        except (TypeError, ValueError):
            raise NKIError(f"launch grid {grid!r}: every dimension must be an int") from None
        if n < 1:
            raise NKIError(f"launch grid {grid!r}: every dimension must be at least 1")
        out.append(n)
    return tuple(out)


def _is_mutable_annotation(annotation: Any) -> bool:
    from .typing import mutable_tensor
    if annotation is mutable_tensor:
        return True
    return isinstance(annotation, str) and annotation.split(".")[-1] == "mutable_tensor"


@dataclass
class RunResult:
    outputs: Any                      # the kernel's return value, as the caller's tensors
    work: _launch.EngineWork
    written_inputs: list              # parameter names of inputs the kernel wrote
    sbuf_peak: int = 0
    output_specs: list = field(default_factory=list)  # [(shape, dtype)] of the outputs, flattened


def bind(func: Callable, args: tuple, kwargs: dict) -> inspect.BoundArguments:
    try:
        bound = inspect.signature(func).bind(*args, **kwargs)
    except TypeError as e:
        raise NKIError(f"kernel '{func.__name__}': {e}") from None
    bound.apply_defaults()
    return bound


def run(func: Callable, grid: tuple, args: tuple, kwargs: dict, *, device: str = "cpu",
        limits: Optional[Limits] = None, dry_run: bool = False, declared_mutable: Iterable[str] = (),
        writable_storages: Optional[set] = None, hbm_factory: Optional[Callable] = None,
        name: Optional[str] = None) -> RunResult:
    name = name or func.__name__
    bound = bind(func, args, kwargs)
    params = inspect.signature(func).parameters
    declared = set(declared_mutable)
    launch = _launch.Launch(name, limits or active_limits(), grid, device)
    launch.dry_run = dry_run
    launch.hbm_factory = hbm_factory
    callers: dict = {}
    names = list(bound.arguments)
    call_args: dict = {}
    for i, pname in enumerate(names):
        value = bound.arguments[pname]
        if isinstance(value, torch.Tensor):
            mutable = (pname in declared or _is_mutable_annotation(params[pname].annotation)
                       or (writable_storages is not None and value.untyped_storage().data_ptr() in writable_storages
                           if value.device.type != "meta" else False))
            arg = argument(value, pname, i, mutable)
            callers[id(arg.t)] = value
            call_args[pname] = arg
        else:
            call_args[pname] = value
    result = None
    with _launch.active(launch):
        points = itertools.product(*(range(g) for g in grid)) if grid else [()]
        for point in points:
            launch.program = point
            launch.shared_next = 0
            launch.instruction = ""
            result = _call(func, params, call_args)
        outputs, specs = _outputs(name, result, callers)
    written = [names[i] for i in sorted(launch.written_inputs)]
    return RunResult(outputs, launch.work, written, launch.sbuf_peak, specs)


def _call(func: Callable, params: Any, call_args: dict) -> Any:
    pos, kw = [], {}
    for pname, p in params.items():
        if p.kind in (p.POSITIONAL_ONLY,):
            pos.append(call_args[pname])
        elif p.kind == p.VAR_POSITIONAL:
            pos.extend(call_args.get(pname, ()))
        elif p.kind == p.VAR_KEYWORD:
            kw.update(call_args.get(pname, {}))
        else:
            kw[pname] = call_args[pname]
    return func(*pos, **kw)


def _outputs(name: str, result: Any, callers: dict) -> tuple:
    specs: list = []

    def convert(x: Any) -> Any:
        if isinstance(x, NkiTensor):
            if x.buffer.on_chip:
                raise fail("return", f"kernel '{name}' returned '{x.name}' in {x.buffer!r}; a kernel returns tensors "
                           "in HBM", "allocate the output with buffer=nl.shared_hbm and store the tile into it")
            if x.alloc.input_index >= 0:
                t = callers[id(x.t)] if id(x.t) in callers else x.t
            else:
                if x.alloc.written is not None and x.t.device.type != "meta" and marks(x) is False:
                    raise fail("return", f"output '{x.name}' {x.shape} is never written by the kernel",
                               "store results into it (nl.store / nisa.dma_copy) before returning it")
                t = x.t
            specs.append((tuple(t.shape), t.dtype))
            return t
        if isinstance(x, (tuple, list)):
            return type(x)(convert(v) for v in x)
        return x

    return convert(result), specs


def kernel_function(kernel: Any) -> tuple:
    """(the Python function, its grid) of an @nki.jit kernel or a plain function."""
    # An @nki.jit kernel (jit.Kernel), a real nki install's kernel object, or a plain function.
    func = getattr(kernel, "func", None) or getattr(kernel, "__wrapped__", None) or kernel
    if not callable(func):
        raise NKIError(f"{kernel!r} is not an NKI kernel (an @nki.jit function)")
    return func, tuple(getattr(kernel, "grid", ()) or ())
