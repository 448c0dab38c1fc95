"""The memory API of torch_neuronx (its `neuron.py` and `memory.py`) over each
device's caching segment allocator (docs/memory.md), with torch.cuda's names
and keys. Every number is read from the allocator in one place
(`_C._memory_stats`); torch.neuron, torch_neuronx and torch_neuron_sim report
the same, and torch.accelerator's memory functions read the same numbers
through the C++ DeviceAllocator. They always satisfy
reserved >= allocated >= active."""
from __future__ import annotations

import collections
import pickle
import sys
from typing import Any

from .. import _C
from ..devices.device import _checked, _DeviceLike, device_count


def memory_stats_as_nested_dict(device: _DeviceLike = None) -> dict[str, Any]:
    """torch.cuda.memory_stats_as_nested_dict(): each byte and count statistic
    per pool ("all", "small_pool", "large_pool"), each with current, peak,
    allocated and freed; plus the counters (num_alloc_retries, num_ooms, ...)."""
    return _C._memory_stats(_checked(device))


def memory_stats(device: _DeviceLike = None) -> dict[str, Any]:
    """torch.cuda.memory_stats(): the nested statistics flattened to keys such
    as "allocated_bytes.all.current" and "reserved_bytes.large_pool.peak",
    sorted. reserved_bytes: segments held; allocated_bytes: live blocks (size
    classes); active_bytes (= requested_bytes): what live tensors asked for;
    inactive_split_bytes: free blocks in segments still in use."""
    out: list[tuple[str, Any]] = []

    def walk(prefix: str, obj: Any) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        else:
            out.append((prefix, obj))

    walk("", memory_stats_as_nested_dict(device))
    return collections.OrderedDict(sorted(out))


def _stat(device: _DeviceLike, name: str, field: str) -> int:
    return memory_stats_as_nested_dict(device)[name]["all"][field]


def memory_allocated(device: _DeviceLike = None) -> int:
    """Bytes of the blocks held by live tensors (requests rounded to size classes)."""
    return _stat(device, "allocated_bytes", "current")


def max_memory_allocated(device: _DeviceLike = None) -> int:
    return _stat(device, "allocated_bytes", "peak")


def memory_reserved(device: _DeviceLike = None) -> int:
    """Bytes of the segments the caching allocator holds, free blocks included."""
    return _stat(device, "reserved_bytes", "current")


def max_memory_reserved(device: _DeviceLike = None) -> int:
    return _stat(device, "reserved_bytes", "peak")


def memory_cached(device: _DeviceLike = None) -> int:
    """Deprecated torch.cuda name of memory_reserved."""
    return memory_reserved(device)


def max_memory_cached(device: _DeviceLike = None) -> int:
    return max_memory_reserved(device)


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    _C._reset_peak(_checked(device))


def reset_accumulated_memory_stats(device: _DeviceLike = None) -> None:
    _C._reset_accumulated(_checked(device))


def reset_max_memory_allocated(device: _DeviceLike = None) -> None:
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device: _DeviceLike = None) -> None:
    reset_peak_memory_stats(device)


def empty_cache() -> None:
    """Return every cached segment that holds no live block to the device
    (on every device), as torch.cuda.empty_cache() does; segments with live
    tensors stay. The host gets back the pages of the freed ranges."""
    import torch

    torch._C._accelerator_emptyCache()  # the DeviceAllocator's emptyCache (allocator.cpp)


def mem_get_info(device: _DeviceLike = None) -> tuple[int, int]:
    """(free, total) bytes of a device's HBM: free is what no segment holds."""
    i = _checked(device)
    total = _C._capacity(i)
    return total - memory_reserved(i), total


def caching_allocator_alloc(size: int, device: _DeviceLike = None, stream: Any = None) -> int:
    """torch.cuda.caching_allocator_alloc: `size` bytes from a device's
    allocator, as an address; free it with caching_allocator_delete."""
    if not isinstance(size, int) or size < 0:
        raise ValueError(f"size must be a non-negative int, got {size!r}")
    return _C._raw_alloc(_checked(device), size)


def caching_allocator_delete(mem_ptr: int) -> None:
    """Free memory from caching_allocator_alloc. An address that is no live
    block of a neuron allocator raises ValueError (and frees nothing)."""
    _C._raw_free(int(mem_ptr))


def _fmt(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def memory_summary(device: _DeviceLike = None, abbreviated: bool = False) -> str:
    """torch.cuda.memory_summary()'s table for a device, from the same
    statistics as memory_stats(): each metric for all pools, then (unless
    abbreviated) from the large and the small pool."""
    i = _checked(device)
    s = memory_stats_as_nested_dict(i)
    width = 79
    lines = [
        "=" * width,
        f" Neuron Memory Summary, Device {i}  (HBM {_fmt(_C._capacity(i))})",
        "-" * width,
        f" Allocations: {s['allocation_requests']}  Frees: {s['num_tensor_frees']}  OOMs: {s['num_ooms']}  "
        f"Retries: {s['num_alloc_retries']}  Segments from the device: {s['num_device_alloc']}  "
        f"returned: {s['num_device_free']}",
        "=" * width,
        f" {'Metric':<26}{'Cur Usage':>13}{'Peak Usage':>13}{'Tot Alloc':>13}{'Tot Freed':>13}",
    ]
    metrics = (("allocated_bytes", "Allocated memory", _fmt), ("active_bytes", "Active memory", _fmt),
               ("reserved_bytes", "Reserved memory", _fmt), ("inactive_split_bytes", "Non-releasable memory", _fmt),
               ("allocation", "Allocations", str), ("active", "Active allocs", str),
               ("segment", "Reserved segments", str), ("inactive_split", "Non-releasable allocs", str))
    pools = (("all", ""),) if abbreviated else (("all", ""), ("large_pool", "  from large pool"),
                                                  ("small_pool", "  from small pool"))
    for key, label, fmt in metrics:
        lines.append("-" * width)
        for pool, suffix in pools:
            st = s[key][pool]
            lines.append(f" {(suffix or label):<26}"
                         + "".join(f"{fmt(st[k]):>13}" for k in ("current", "peak", "allocated", "freed")))
    limit = _C._memory_limit(i)
    lines += [
        "-" * width,
        f" Largest free block: {_fmt(s['largest_free_block'])}"
        + (f"  Process limit: {_fmt(limit)}" if limit < _C._capacity(i) else ""),
        "=" * width,
    ]
    return "\n".join(lines) + "\n"


def list_gpu_processes(device: _DeviceLike = None) -> str:
    return f"neuron:{_checked(device)}: one simulated device per process"


# ---- beyond the real backend: limits ---------------------------------------

def set_per_process_memory_fraction(fraction: float, device: _DeviceLike = None) -> None:
    """Cap this process at `fraction` of a device's HBM, as torch.cuda does:
    an allocation that would take the reserved bytes (segments) past the cap
    raises torch.OutOfMemoryError (after the usual retry), as a full device would."""
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
    {"segments": [each segment of each device's caching allocator, with
    every block, free ones included, so fragmentation is visible],
    "device_traces": [per device, the recorded
    alloc/free_requested/free_completed/oom actions]}."""
    return _C._memory_snapshot()


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Pickle _snapshot() to `filename`, for
    `python -m torch.cuda._memory_viz segment_plot <file> -o out.html` (or
    trace_plot) or
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


def cached_blocks(device: int) -> int:
    """Free blocks cached in a device's segments (torch_neuronx's
    NeuronCachingAllocator.getCachedBlocks)."""
    return sum(not live for seg in _C._segments(device) for *_, live in seg[3])
