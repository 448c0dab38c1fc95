"""--map-cuda: run CUDA-written code on neuron. While active, every "cuda"
device given to a torch function or Tensor method (.to("cuda"), .cuda(),
device="cuda:1", torch.device("cuda")) becomes the same neuron device, and
torch.cuda's availability/device queries answer for neuron.

This costs a Python call per torch function (a TorchFunctionMode), so it is
for migration reports, not for speed; device-agnostic code through
torch.accelerator needs none of it.
"""
from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch.overrides import TorchFunctionMode


def _map(v: Any) -> Any:
    if isinstance(v, torch.device):
        return torch.device("neuron", v.index) if v.type == "cuda" else v
    if isinstance(v, str) and (v == "cuda" or v.startswith("cuda:")):
        return "neuron" + v[4:]
    if isinstance(v, (list, tuple)) and any(isinstance(x, (str, torch.device)) for x in v):
        return type(v)(_map(x) for x in v)
    return v


class _CudaToNeuron(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.cuda:
            self_, *rest = args
            dev = kwargs.pop("device", rest[0] if rest else None)
            idx = dev.index if isinstance(dev, torch.device) else dev if isinstance(dev, int) else None
            target = torch.device("neuron", idx) if idx is not None else torch.device("neuron")
            return self_.to(target, non_blocking=kwargs.get("non_blocking", False))
        return func(*(_map(a) for a in args), **{k: _map(v) for k, v in kwargs.items()})


_PATCHES = {
    "is_available": lambda: torch.neuron.is_available(),
    "device_count": lambda: torch.neuron.device_count(),
    "current_device": lambda: torch.neuron.current_device(),
    "set_device": lambda d: torch.neuron.set_device(_map(d) if not isinstance(d, int) else d),
    "synchronize": lambda device=None: torch.neuron.synchronize(),
    "is_bf16_supported": lambda *a, **k: True,
    "manual_seed": lambda s: torch.neuron.manual_seed(s),
    "manual_seed_all": lambda s: torch.neuron.manual_seed_all(s),
}


@contextlib.contextmanager
def map_cuda_to_neuron():
    """Context manager: "cuda" means neuron inside it."""
    saved = {name: getattr(torch.cuda, name) for name in _PATCHES}
    for name, fn in _PATCHES.items():
        setattr(torch.cuda, name, fn)
    mode = _CudaToNeuron()
    mode.__enter__()
    try:
        yield
    finally:
        mode.__exit__(None, None, None)
        for name, fn in saved.items():
            setattr(torch.cuda, name, fn)
