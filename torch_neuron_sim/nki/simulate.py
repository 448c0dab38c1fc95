"""nki.simulate(kernel)(*arrays): run a kernel on NumPy arrays or CPU tensors,
as AWS's `nki.simulate` does, with the same checks as on `neuron` plus the
on-chip capacity ones. Arguments become HBM tensors; inputs the kernel writes
(declared mutable) are updated in place; outputs come back as the argument
kind: NumPy arrays for NumPy inputs, CPU tensors for tensors."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch

from . import kernel as _kernel
from .. import environment


def _to_torch(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        if v.dtype == np.float64:
            raise TypeError("nki.simulate: float64 arrays are not an NKI dtype; pass float32 (or bfloat16/float16)")
        return torch.from_numpy(v)  # shares memory: writes reach the array
    if isinstance(v, torch.Tensor) and v.device.type != "cpu":
        raise TypeError(f"nki.simulate takes NumPy arrays or CPU tensors, got a tensor on {v.device}; for "
                        "`neuron` tensors call the kernel through torch_neuronx.wrap_nki")
    return v


def _to_numpy(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return v.float().numpy() if v.dtype == torch.bfloat16 else v.numpy()
    if isinstance(v, (tuple, list)):
        return type(v)(_to_numpy(x) for x in v)
    return v


class _Simulated:
    def __init__(self, kernel: Any, grid: tuple = ()) -> None:
        self.func, own = _kernel.kernel_function(kernel)
        self.grid = grid or own
        self.kernel = kernel

    def __getitem__(self, grid: Any) -> "_Simulated":
        return _Simulated(self.kernel, _kernel._grid(grid))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        numpy_in = any(isinstance(v, np.ndarray) for v in list(args) + list(kwargs.values()))
        targs = tuple(_to_torch(a) for a in args)
        tkw = {k: _to_torch(v) for k, v in kwargs.items()}
        result = _kernel.run(self.func, self.grid, targs, tkw, limits=_target_limits())
        from .cost import record_launch
        self.last_cost = record_launch(self.func.__name__, result.work, device=None)  # nki.benchmark reads it
        return _to_numpy(result.outputs) if numpy_in else result.outputs


_TARGETS = {"trn1": "trn1", "gen2": "trn1", "trn2": "trn2", "gen3": "trn2", "trn3": "trn3", "gen4": "trn3"}


def _target_limits():
    """NEURON_PLATFORM_TARGET_OVERRIDE (trn1/gen2, trn2/gen3, trn3/gen4) picks the
    generation, as for AWS's simulator; otherwise the simulated machine's profile."""
    from .limits import active_limits, limits_for
    target = environment.setting("NEURON_PLATFORM_TARGET_OVERRIDE") or None
    if not target:
        return active_limits()
    if target not in _TARGETS:
        raise ValueError(f"NEURON_PLATFORM_TARGET_OVERRIDE={target!r}: use trn1/gen2, trn2/gen3 or trn3/gen4")
    return limits_for(_TARGETS[target])


def simulate(kernel: Any, grid: Optional[Any] = None) -> _Simulated:
    """nki.simulate(kernel)(*args) or nki.simulate(kernel[grid])(*args)."""
    s = _Simulated(kernel)
    return s[grid] if grid is not None else s
