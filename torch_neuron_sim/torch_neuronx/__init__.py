"""The torch_neuronx API (its `__init__.py`, `neuron.py`, `metrics.py`) over the emulator, and the
alias that makes `import torch_neuronx` resolve to it, so code and tests
written for the real backend, and the training stacks that look for it with
`importlib.util.find_spec("torch_neuronx")`, run unmodified on machines
without Trainium. The alias is on from the moment torch autoloads the
emulator (torch_neuronx/alias.py), stays out of a real installation's way,
and is switched off with NEURON_SIM_TORCH_NEURONX_ALIAS=0.

This module is what `torch_neuronx` becomes. Environment variables of the
real backend that carry meaning here are read at import (see _configure):
TORCH_NEURONX_LOG_LEVEL, TORCH_NEURONX_LOG_FILE, TORCH_NEURONX_METRICS_ENABLED,
TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS; the device variables
(NEURON_RT_VISIBLE_CORES, NEURON_RT_NUM_CORES, NEURON_LOGICAL_NC_CONFIG) are
read by the C++ device table, NEURON_LAUNCH_BLOCKING by torch_neuron_sim.streams.
"""
from __future__ import annotations

import logging
import os
import sys
from typing import Any, Callable

from .. import _C as _core
from .. import environment
from ..execution import compile_cache
from .. import memory
from . import metrics
from ..devices import random as _random, streams as _streams
from ..devices.device import device as _device_context
from ..devices.device import _checked, _index, current_device, device_count, synchronize
from ..memory import (  # the caching allocator's numbers, as torch.neuron reports them
    empty_cache, max_memory_allocated, max_memory_reserved, memory_allocated, memory_reserved, memory_stats,
    memory_summary, reset_accumulated_memory_stats, reset_peak_memory_stats,
)
from ..execution import tracking
from ..devices.device import _lazy_init as _device_lazy_init, is_initialized as _device_is_initialized
from ..execution.tracking import clear_op_tracking, get_executed_ops, get_fallback_ops

__version__ = "0.1.0"  # the public torch_neuronx pre-release this API follows

from . import alias as _alias
from .alias import ALIAS_ENV  # noqa: F401
_STREAM_NAMES = ("current_stream", "default_stream", "set_stream", "stream", "Stream", "Event")


def __getattr__(name: str) -> Any:
    # Streams and the device context manager live in their own modules.
    if name in _STREAM_NAMES:
        return getattr(_streams, name)
    if name == "device":
        return _device_context
    raise AttributeError(f"module 'torch_neuronx' (torch_neuron_sim emulator) has no attribute '{name}'")


class _NeuronCachingAllocator:
    """`torch_neuronx._C.NeuronCachingAllocator`: the caching segment
    allocator (docs/memory.md). Freed blocks stay cached in their segments;
    emptyCache returns the segments that hold no live block."""

    @staticmethod
    def emptyCache() -> None:
        memory.empty_cache()

    @staticmethod
    def getCachedBlocks() -> int:
        """Free blocks cached in the current device's segments."""
        return memory.cached_blocks(current_device())


def _copy_entry(direction: str) -> Callable:
    def copy(src: Any, dst: Any, non_blocking: bool = False) -> None:
        """Copies src into dst (host to device or back): the host bounce itself."""
        _core._nrt_copy(src, dst)
    copy.__name__ = f"_nrt_copy_{direction}_tensor"
    return copy


_COPY_ENTRIES = ("_nrt_copy_cpu_to_neuron_tensor", "_nrt_copy_neuron_to_cpu_tensor")


class _CInternals:
    """`torch_neuronx._C`: the internals real-backend tests and their helpers
    use (_get_default_generator, _get_compilation_cache_stats,
    NeuronCachingAllocator, the _nrt_copy_* host-bounce entry points);
    everything else is the emulator's own _C.

    Every copy between host and device goes through the two _nrt_copy_*
    entry points while a test has one replaced (torch_neuronx's
    count_cpu_bounce_calls wraps them to count host bounces); otherwise, and
    again once the originals are back (assigned back, deleted, or restored
    by mock.patch), the copy path does not call into Python at all."""

    NeuronCachingAllocator = _NeuronCachingAllocator
    _nrt_copy_cpu_to_neuron_tensor = staticmethod(_copy_entry("cpu_to_neuron"))
    _nrt_copy_neuron_to_cpu_tensor = staticmethod(_copy_entry("neuron_to_cpu"))

    @staticmethod
    def _get_compilation_cache_stats() -> dict:
        return compile_cache.stats()

    @staticmethod
    def _get_default_generator(device: int = 0) -> Any:
        return _random.default_generator(device)

    # Devices, as torch_neuronx's Python layer calls them (tests patch them).
    @staticmethod
    def _vnc_count() -> int:
        """The visible logical NeuronCores (virtual NeuronCores, VNCs)."""
        return device_count()

    @staticmethod
    def _neuron_getDeviceCount() -> int:
        return device_count()

    @staticmethod
    def _neuron_getCurrentDevice() -> int:
        return current_device()

    @staticmethod
    def _neuron_setDevice(device_id: int) -> None:
        from ..devices.device import set_device as _set
        _set(device_id)

    @staticmethod
    def _neuron_getDeviceProperties(device_id: int) -> Any:
        from ..devices.device import NeuronDeviceProperties, machine
        _checked(device_id)  # the runtime refuses an index it does not have
        m = machine()
        return NeuronDeviceProperties(m["profile"], m["hbm_per_device"])

    @staticmethod
    def _is_neuron_runtime_initialized() -> bool:
        return _device_is_initialized()

    def __getattr__(self, name: str) -> Any:
        return getattr(_core, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _COPY_ENTRIES and value is getattr(type(self), name):
            # Restoring the original (count_cpu_bounce_calls restores by
            # assignment): the entry point is no longer replaced.
            self.__dict__.pop(name, None)
        else:
            object.__setattr__(self, name, value)
        if name in _COPY_ENTRIES:
            self._route()

    def __delattr__(self, name: str) -> None:
        if name in _COPY_ENTRIES:
            self.__dict__.pop(name, None)  # deleting a replacement restores the original
            self._route()
        else:
            object.__delattr__(self, name)

    def _route(self) -> None:
        # Route host<->device copies through Python only while an entry point is replaced.
        replaced = any(name in self.__dict__ for name in _COPY_ENTRIES)
        _core._set_copy_router(_route_copy if replaced else None)


def _route_copy(src: Any, dst: Any) -> None:
    # Called by the copy kernel (csrc/aten/kernels/copy.cpp) for each host<->device copy while routed.
    name = "_nrt_copy_cpu_to_neuron_tensor" if dst.device.type == "neuron" else "_nrt_copy_neuron_to_cpu_tensor"
    getattr(_C, name)(src, dst)


_C = _CInternals()


def set_device(device: int) -> None:
    """Set the current neuron device (and the process default new threads see).
    Out of range: ValueError "Invalid device id: N. Valid range is 0 to M"."""
    _checked(device)
    _C._neuron_setDevice(device)


def get_device_properties(device: Any = None) -> Any:
    """An index or "neuron:i": the device's name (instance family) and
    total_memory; an invalid one is a ValueError "Invalid device id: N"."""
    device_id = current_device() if device is None else _index(device)
    if device_id < 0 or device_id >= device_count():
        raise ValueError(f"Invalid device id: {device_id}")
    _lazy_init()
    return _C._neuron_getDeviceProperties(device_id)


def is_neuron_runtime_initialized() -> bool:
    return _device_is_initialized()


def _lazy_init() -> None:
    """Raises in a child process forked after the parent used neuron (use 'spawn')."""
    _device_lazy_init()


def get_dynamo_metrics() -> list:
    """One NeuronCompilationMetrics per graph torch.compile(backend="neuron") compiled."""
    from ..compile import get_dynamo_metrics
    return get_dynamo_metrics()


def reset_dynamo_metrics() -> None:
    """Forget the graph metrics and the Dynamo counters["neuron"] counters."""
    from ..compile import reset_dynamo_metrics
    reset_dynamo_metrics()


def nki_op(name: str, fn: Any = None, mutates_args: Any = (), **kwargs: Any) -> Any:
    """An NKI kernel call as a torch.library custom op (the NKI simulator runs
    the kernels; docs/nki.md)."""
    from ..nki.torch_wiring import nki_op as _nki_op
    return _nki_op(name, fn, mutates_args=mutates_args, **kwargs)


def wrap_nki(kernel: Any = None, **kwargs: Any) -> Any:
    """`wrap_nki(kernel)[grid](*args)`: launches an NKI kernel on the tensors'
    device (the NKI simulator; docs/nki.md)."""
    from ..nki.torch_wiring import wrap_nki as _wrap_nki
    return _wrap_nki(kernel, **kwargs)


# torch_neuronx.profiling: the profiler glue (NeuronProfiler, and the release's NeuronConfig/ProfileMode)
from .profiling import NeuronProfiler, NRTProfilerError  # noqa: E402,F401


# ---- environment -------------------------------------------------------------

_LOG_LEVELS = {"0": logging.ERROR, "1": logging.WARNING, "2": logging.INFO, "3": logging.DEBUG,
               "ERROR": logging.ERROR, "WARNING": logging.WARNING, "INFO": logging.INFO, "DEBUG": logging.DEBUG}


def _configure() -> None:
    log = logging.getLogger("torch_neuron_sim")
    level = environment.setting("TORCH_NEURONX_LOG_LEVEL").upper()
    if level:
        if level not in _LOG_LEVELS:
            raise ValueError(f"TORCH_NEURONX_LOG_LEVEL={level!r}: use 0-3 or ERROR, WARNING, INFO, DEBUG")
        log.setLevel(_LOG_LEVELS[level])
    path = environment.setting("TORCH_NEURONX_LOG_FILE")
    if path:
        if not log.handlers and not logging.getLogger().handlers:
            # Python prints to stderr only while no handler exists anywhere: keep that
            # output (the file is in addition to it), as it was without the file.
            log.addHandler(logging.StreamHandler())
        handler = logging.FileHandler(path)  # appends
        handler.setFormatter(logging.Formatter("[Neuron] [%(levelname)s] %(message)s"))
        log.addHandler(handler)
    tracking.set_fallback_only_for_unimplemented(environment.flag("TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS"))
    if _alias.enabled():
        _alias.install_finder(_alias_top_level)  # find_spec/import of torch_neuronx, nki, neuronxcc find the emulator's


def _alias_top_level(name: str) -> Any:
    # The alias finder's first import of torch_neuronx, nki or neuronxcc: register and return it.
    if name == "torch_neuronx":
        install_torch_neuronx_alias()
    else:
        from ..nki import install_nki_alias
        install_nki_alias()
    return sys.modules[name]


def install_torch_neuronx_alias() -> None:
    """Make `import torch_neuronx` (and torch_neuronx.metrics / .memory /
    .utils / ._C, and nki) resolve to the emulator in this process, now,
    also where NEURON_SIM_TORCH_NEURONX_ALIAS=0 kept the automatic alias off.
    Nothing to do when it already does; a real torch_neuronx installation
    always wins (the call then leaves it alone)."""
    this = sys.modules[__name__]
    if sys.modules.get("torch_neuronx") is this:
        return
    existing = sys.modules.get("torch_neuronx")
    if (existing is not None and not _alias.placeholder(existing)) or _alias.real_spec("torch_neuronx") is not None:
        logging.getLogger("torch_neuron_sim").info(
            "install_torch_neuronx_alias: a real torch_neuronx is installed and stays what `import torch_neuronx` gives")
        return
    _alias.install_finder(_alias_top_level)
    from . import utils as torch_neuronx_utils

    # `from torch_neuronx import neuron` finds torch.neuron: this package's
    # neuron module, imported (and so set on the package) when the device registered.
    this.utils = torch_neuronx_utils
    sys.modules["torch_neuronx"] = this
    sys.modules["torch_neuronx.metrics"] = metrics
    sys.modules["torch_neuronx.memory"] = memory
    sys.modules["torch_neuronx.utils"] = torch_neuronx_utils
    sys.modules["torch_neuronx.neuron"] = this.neuron
    sys.modules["torch_neuronx._C"] = _C  # `import torch_neuronx._C as _C`, as its test helpers do
    from ..nki import install_nki_alias
    install_nki_alias()  # `import nki` / `neuronxcc.nki` -> the NKI simulator, unless really installed
