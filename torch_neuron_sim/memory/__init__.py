"""The memory API of torch_neuronx (its `neuron.py` and `memory.py`) over the simulated HBM
arenas, with torch.cuda's names. torch.accelerator's memory functions read
the same numbers through the C++ DeviceAllocator."""
from __future__ import annotations

import collections
import pickle
import sys
from typing import Any

from .. import _C
from ..devices.device import _checked, _DeviceLike, device_count


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


# ---- as the device reports them (torch.neuron, torch_neuronx) ---------------
# TorchNeuron's allocator keeps no cache: it reports reserved_bytes as 0
# (current and peak) whatever is allocated. torch.neuron and torch_neuronx
# report that; the arena's own reservation (live blocks rounded up to 512
# bytes) stays visible through torch_neuron_sim.memory_reserved() and
# torch_neuron_sim.memory_stats().

def device_memory_stats(device: _DeviceLike = None) -> dict[str, Any]:
    """memory_stats as the device reports it: reserved_bytes all zero."""
    s = memory_stats(device)
    s["reserved_bytes"] = {k: 0 for k in s["reserved_bytes"]}
    return s


def device_memory_reserved(device: _DeviceLike = None) -> int:
    """0, as the device reports (its allocator reserves nothing beyond live allocations)."""
    _checked(device)
    return 0


def device_max_memory_reserved(device: _DeviceLike = None) -> int:
    _checked(device)
    return 0


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

    torch._C._accelerator_emptyCache()  # the DeviceAllocator's emptyCache (allocator.cpp)


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
    # Fragmentation: an OOM with plenty free but a small largest range means
    # live blocks are scattered (look at a snapshot to see where).
    free = [size for _, size, _, live in _C._arena_blocks(i) if not live]
    limit = _C._memory_limit(i)
    lines += [
        "-" * 75,
        f" Free ranges: {len(free)}  Largest free range: {_fmt(max(free, default=0))}"
        + (f"  Process limit: {_fmt(limit)}" if limit < _C._capacity(i) else ""),
    ]
    lines.append("=" * 75)
    return "\n".join(lines) + "\n"


def list_gpu_processes(device: _DeviceLike = None) -> str:
    return f"neuron:{_checked(device)}: one simulated device per process"


# ---- beyond the real backend: limits ---------------------------------------

def set_per_process_memory_fraction(fraction: float, device: _DeviceLike = None) -> None:
    """Cap this process at `fraction` of a device's HBM, as torch.cuda does:
    an allocation that would take the bytes held by blocks past the cap raises
    torch.OutOfMemoryError (after the usual retry), as a full device would."""
    if not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    i = _checked(device)
    _C._set_memory_limit(i, int(fraction * _C._capacity(i)))


def get_per_process_memory_fraction(device: _DeviceLike = None) -> float:
    i = _checked(device)
    return _C._memory_limit(i) / _C._capacity(i)


# ---- snapshots for PyTorch's memory visualizer -----------------------------

_history_mode: str | None = None  # what the program asked for (the migration report reads it)


def _record_memory_history(enabled: str | None = "all", context: str | None = "all", stacks: str = "all",
                           max_entries: int = sys.maxsize, device: _DeviceLike = None,
                           clear_history: bool = False, **_ignored: Any) -> None:
    """Start (enabled="all": stacks and a trace of every alloc/free; "state":
    stacks of live blocks only) or stop (enabled=None) recording, with
    torch.cuda.memory's signature. Each allocation records its Python stack
    (stacks="all" and "python" both record Python frames; C++ frames are not
    captured); context=None records sizes without stacks. The trace keeps the
    last `max_entries` entries per device. Covers every device."""
    if stacks not in ("all", "python"):
        raise ValueError(f"stacks must be 'all' or 'python', got {stacks!r}")
    global _history_mode
    _C._record_memory_history(enabled, context, min(max_entries, sys.maxsize), clear_history)
    _history_mode = enabled


def _snapshot(device: _DeviceLike = None) -> dict[str, Any]:
    """The memory state in torch.cuda.memory._snapshot()'s format:
    {"segments": [one per device arena, with every block, free ones
    included, so fragmentation is visible], "device_traces": [per device,
    the recorded alloc/free_requested/free_completed/oom actions]}."""
    return _C._memory_snapshot()


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Pickle _snapshot() to `filename`, for
    `python -m torch.cuda._memory_viz trace_plot <file> -o out.html` or
    https://pytorch.org/memory_viz."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


def memory_snapshot() -> list[dict[str, Any]]:
    """The segments of _snapshot(), as torch.cuda.memory_snapshot() returns."""
    return _snapshot()["segments"]


# ---- debug modes -----------------------------------------------------------

def debug_modes() -> dict[str, bool]:
    """Which of NEURON_SIM_POISON / NEURON_SIM_GUARD / NEURON_SIM_PROTECT are on."""
    return _C._debug_modes()


def check_guards() -> None:
    """Raise RuntimeError naming every live block whose guard bytes were
    overwritten (needs NEURON_SIM_GUARD=1). Freeing such a block aborts the
    process with the same report; this finds damage without aborting."""
    damaged = _C._check_guards()
    if not damaged:
        return
    lines = [f"{len(damaged)} neuron block(s) have overwritten guard bytes (an out-of-bounds write):"]
    for dev, ptr, size, at, site in damaged:
        where = (f"offset {at}, byte {at - size + 1} past the end" if at >= 0 else f"byte {-at} before the start")
        lines.append(f"- neuron:{dev} block of {size} bytes at {ptr:#x}: first damaged byte {where}; "
                     f"allocated at (most recent call last):\n{site.rstrip()}")
    raise RuntimeError("\n".join(lines))
