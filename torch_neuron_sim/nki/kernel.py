"""@nki.jit, kernel[grid], and running one launch of a kernel.

A launch binds the arguments to the kernel's parameters (tensors become HBM
tensors, everything else is a compile-time constant), runs the kernel body
once per point of the grid with nl.program_id set (one instance after
another, as AWS's simulator does), and turns what the kernel returns back
into the caller's tensors. The engines' work of all instances is the
launch's, for the cost model."""
from __future__ import annotations

import functools
import inspect
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

import torch

from . import launch as _launch
from .errors import NKIError, fail
from .limits import Limits, active_limits
from .memory import NkiTensor, argument


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
                if x.alloc.written is not None and x.t.device.type != "meta" and not bool(x.alloc.written.any()):
                    raise fail("return", f"output '{x.name}' {x.shape} is never written by the kernel",
                               "store results into it (nl.store / nisa.dma_copy) before returning it")
                t = x.t
            specs.append((tuple(t.shape), t.dtype))
            return t
        if isinstance(x, (tuple, list)):
            return type(x)(convert(v) for v in x)
        return x

    return convert(result), specs


class Kernel:
    """An @nki.jit kernel. `kernel[grid]` fixes the launch grid (`kernel[2]`:
    two logical cores under LNC=2, nl.program_id(0) is the core id); calling
    it runs it: on `neuron` tensors through the PyTorch wiring (as
    torch_neuronx.wrap_nki does), on NumPy arrays or CPU tensors in the
    simulator (as nki.simulate), and inside another kernel as a plain
    function."""

    def __init__(self, func: Callable, grid: tuple = (), **options: Any) -> None:
        functools.update_wrapper(self, func)
        self.func = func
        self.grid = grid
        self.options = options

    @property
    def name(self) -> str:
        return self.func.__name__

    def __getitem__(self, grid: Any) -> "Kernel":
        return Kernel(self.func, _grid(grid), **self.options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _launch.current_or_none() is not None:
            return self.func(*args, **kwargs)
        values = list(args) + list(kwargs.values())
        if any(isinstance(v, torch.Tensor) and v.device.type == "neuron" for v in values):
            from .torch_wiring import wrap_nki
            return wrap_nki(self)[self.grid](*args, **kwargs)
        from .simulate import simulate
        return simulate(self)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<nki kernel '{self.name}'{' grid ' + str(self.grid) if self.grid else ''}>"


def jit(func: Optional[Callable] = None, **options: Any) -> Any:
    """@nki.jit or @nki.jit(platform_target=..., ...)."""
    if func is None:
        return lambda f: Kernel(f, **options)
    if isinstance(func, Kernel):
        return func
    return Kernel(func, **options)


def kernel_function(kernel: Any) -> tuple:
    """(the Python function, its grid) of an @nki.jit kernel or a plain function."""
    if isinstance(kernel, Kernel):
        return kernel.func, kernel.grid
    # A real nki install's kernel object, or a kernel of the legacy decorator: its function.
    func = getattr(kernel, "func", None) or getattr(kernel, "__wrapped__", None) or kernel
    if not callable(func):
        raise NKIError(f"{kernel!r} is not an NKI kernel (an @nki.jit function)")
    return func, ()
