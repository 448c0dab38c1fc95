"""@nki.jit and kernel[grid]: a kernel object that launches its function the
way its arguments call for (kernel.py runs a launch)."""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import torch

from . import launch as _launch
from .kernel import _grid
from .simulate import simulate
from .torch_wiring import wrap_nki


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
            return wrap_nki(self)[self.grid](*args, **kwargs)
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
