"""Devices: count, current device, properties, synchronization. Mirrors
torch.cuda, with torch_neuronx's names and error messages."""
from __future__ import annotations

import contextlib
from typing import Any, Union

import torch

from .. import _C

_DeviceLike = Union[int, str, torch.device, None]


def _index(device: _DeviceLike) -> int:
    """A device index from an int, "neuron", "neuron:1" or torch.device (None, "neuron":
    the current device). The package's one device parser."""
    if device is None or (isinstance(device, str) and device == "neuron"):
        return _C._current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"Expected neuron device, got {device.type}")
        return _C._current_device() if device.index is None else device.index
    if isinstance(device, int):
        return device
    raise ValueError(f"Invalid device specification: {device}")  # the device's words and type


def _checked(device: _DeviceLike) -> int:
    i = _index(device)
    n = device_count()
    if not 0 <= i < n:
        raise ValueError(f"Invalid device id: {i}. Valid range is 0 to {n - 1}")
    return i


def device_count() -> int:
    """Visible logical NeuronCores (NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES)."""
    return _C._device_count()


def is_available() -> bool:
    try:
        return device_count() > 0
    except Exception:
        return False


def is_initialized() -> bool:
    return _C._is_initialized()


def _is_in_bad_fork() -> bool:
    return _C._in_bad_fork()


def _lazy_init() -> None:
    """Raises in a child forked after the parent used neuron (use 'spawn')."""
    _C._lazy_init()


init = _lazy_init


def current_device() -> int:
    return _C._current_device()


def _select(index: int) -> None:
    """Make `index` the current device, for every thread of the process,
    without initialising the runtime (at import, under a launcher:
    torch_neuron_sim.distributed)."""
    _C._set_default_device(index)


def set_device(device: _DeviceLike) -> None:
    """Set the current neuron device: the calling thread's, and the process
    default that threads which never chose a device see (as torch_neuronx)."""
    i = _checked(device)
    _lazy_init()
    _C._set_default_device(i)


def _set_thread_device(index: int) -> None:
    """The calling thread's device only (device guards, stream contexts): the
    process default that set_device sets stays."""
    _C._set_device(index)


class device(contextlib.ContextDecorator):
    """Context manager that changes the current neuron device."""

    def __init__(self, device: _DeviceLike):
        self.idx = -1 if device is None else _index(device)
        self.prev = -1

    def __enter__(self):
        self.prev = current_device()
        if self.idx >= 0 and self.idx != self.prev:
            _set_thread_device(_checked(self.idx))
        return self

    def __exit__(self, *exc: Any) -> bool:
        if self.idx >= 0 and self.idx != self.prev:
            _set_thread_device(self.prev)
        return False


def get_device_name(device: _DeviceLike = None) -> str:
    """'neuron:<i>', as torch_neuronx returns (not a hardware name): from an
    index, a torch.device (its str) or None (the current device). Anything else,
    a string included, is a ValueError, as on the device."""
    if device is None:
        return f"neuron:{current_device()}"
    if isinstance(device, torch.device):
        return str(device)
    if isinstance(device, int):
        return f"neuron:{device}"
    raise ValueError(f"Incorrect device argument found, expected torch.device or int type, found {type(device)}")


class NeuronDeviceProperties:
    """What torch_neuronx reports of a device: instance type name and HBM."""

    def __init__(self, name: str, total_memory: int):
        self.name = name
        self.total_memory = total_memory

    def __repr__(self) -> str:
        return f"<NeuronDeviceProperties(name='{self.name}', total_memory={self.total_memory})>"


def machine() -> dict:
    """The simulated machine: profile, lnc, chips, hbm_per_device, logical_cores_total, visible_cores."""
    return _C._machine()


def get_device_properties(device: _DeviceLike = None) -> NeuronDeviceProperties:
    i = _checked(device)
    m = machine()
    return NeuronDeviceProperties(m["profile"], m["hbm_per_device"])


def get_device_capability(device: _DeviceLike = None) -> tuple[int, int]:
    """(0, 0): Trainium has no CUDA compute capability."""
    return (0, 0)


def synchronize(device: _DeviceLike = None) -> None:
    """Wait for all work on a device (None or -1: every device). Kernels
    complete when launched here; the guard still records the wait for the
    stream-order checker."""
    _C._synchronize_device(-1 if device is None or device == -1 else _checked(device))


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float32, torch.float16, torch.bfloat16]


def _sleep(cycles: int) -> None:
    """No-op, as on torch_neuronx."""
