"""The memory API of torch_neuronx (facts §1b, §6) over the simulated HBM
arenas, with torch.cuda's names. torch.accelerator's memory functions read
the same numbers through the C++ DeviceAllocator."""
from __future__ import annotations

import collections
from typing import Any

from . import _C
from .device import _checked, _DeviceLike, device_count


def memory_stats(device: _DeviceLike = None) -> dict[str, Any]:
    """Keys of the real backend: allocated_bytes, reserved_bytes, active_bytes
    (each current/peak/allocated/freed), num_alloc_retries, num_ooms,
    num_tensor_frees, allocation_requests."""
    return _C._memory_stats(_checked(device))


def memory_allocated(device: _DeviceLike = None) -> int:
    """Bytes held by live tensors (exactly what was requested)."""
    return memory_stats(device)["allocated_bytes"]["current"]


def max_memory_allocated(device: _DeviceLike = None) -> int:
    return memory_stats(device)["allocated_bytes"]["peak"]


def memory_reserved(device: _DeviceLike = None) -> int:
    """Arena bytes held by live blocks (requests rounded up to 512 bytes)."""
    return memory_stats(device)["reserved_bytes"]["current"]


def max_memory_reserved(device: _DeviceLike = None) -> int:
    return memory_stats(device)["reserved_bytes"]["peak"]


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    _C._reset_peak(_checked(device))


def reset_accumulated_memory_stats(device: _DeviceLike = None) -> None:
    _C._reset_accumulated(_checked(device))


def reset_max_memory_allocated(device: _DeviceLike = None) -> None:
    reset_peak_memory_stats(device)


def empty_cache() -> None:
    """Nothing is cached (a freed block returns to the arena at once); this
    gives the host back the pages of free arena ranges."""
    import torch

    if _C._is_initialized():
        torch._C._accelerator_emptyCache() if hasattr(torch._C, "_accelerator_emptyCache") else None


def mem_get_info(device: _DeviceLike = None) -> tuple[int, int]:
    """(free, total) bytes of a device's HBM."""
    i = _checked(device)
    total = _C._capacity(i)
    return total - memory_reserved(i), total


def _fmt(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def memory_summary(device: _DeviceLike = None, abbreviated: bool = False) -> str:
    """A readable table of a device's memory statistics."""
    i = _checked(device)
    s = memory_stats(i)
    lines = [
        "=" * 75,
        f" Neuron Memory Summary, Device {i}  (HBM {_fmt(_C._capacity(i))})",
        "-" * 75,
        f" Allocations: {s['allocation_requests']}  Frees: {s['num_tensor_frees']}  "
        f"OOMs: {s['num_ooms']}  Retries: {s['num_alloc_retries']}",
        "-" * 75,
        f" {'Metric':<18}{'Current':>14}{'Peak':>14}{'Allocated':>14}{'Freed':>14}",
    ]
    for key, label in (("allocated_bytes", "Allocated memory"), ("reserved_bytes", "Reserved memory"),
                       ("active_bytes", "Active memory")):
        st = s[key]
        lines.append(f" {label:<18}" + "".join(f"{_fmt(st[k]):>14}" for k in ("current", "peak", "allocated", "freed")))
    lines.append("=" * 75)
    return "\n".join(lines) + "\n"


def list_gpu_processes(device: _DeviceLike = None) -> str:
    return f"neuron:{_checked(device)}: one simulated device per process"
