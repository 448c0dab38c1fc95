"""torch_neuron_sim: AWS Trainium's PyTorch device, `neuron`, on any CPU.

Importing this package registers the device: PrivateUse1 is renamed to
"neuron", torch.neuron becomes the device module, and Tensor/Module/Storage
gain .neuron() and .is_neuron. With the package installed, `import torch`
alone is enough (PyTorch's device-backend autoload calls _autoload).
"""
from __future__ import annotations


def _autoload() -> None:
    """Entry point of the `torch.backends` group: PyTorch calls it at the end
    of `import torch`. Importing the package does everything. Defined before
    `import torch` so that `import torch_neuron_sim` first (which imports
    torch, which autoloads us) finds it on the half-imported module."""


import torch  # noqa: E402

# The variables torch_neuronx sets on import (docs/semantics.md, environment).
from .environment import apply_release_defaults  # noqa: E402

apply_release_defaults()

# A real torch-neuronx that already owns PrivateUse1: refuse before loading our kernels over it.
from . import coexistence  # noqa: E402

coexistence.check(torch._C._get_privateuse1_backend_name())

from . import _C  # loads the C++ core: allocator, guard, hooks, kernels

__version__ = "0.1.0"


def _register() -> None:
    if torch._C._get_privateuse1_backend_name() != "neuron":
        torch.utils.rename_privateuse1_backend("neuron")
    from .torch_neuronx import neuron as _neuron_module

    torch._register_device_module("neuron", _neuron_module)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_storage=True, unsupported_dtype=None)


_register()

# The package is laid out by concept, as csrc/ is (docs/architecture.md, "The package, by
# concept"): devices/, memory/, execution/, profiler/, migration_report/, compile/,
# distributed/, testing/, nki/ and torch_neuronx/ (the torch_neuronx API and torch.neuron).
# Below are the public names, one table (docs/architecture.md, "Public names"); no public
# name is also a room's, so every room imports by its own path (compile/, nki/ and
# testing/ only when asked for: `import torch_neuron_sim.nki`).
from . import distributed, flex_attention, memory, profiler, torch_neuronx  # noqa: E402
from .devices import autograd_exit, random, stream_check, streams  # noqa: E402
from .devices.device import (  # noqa: E402
    current_device, device, device_count, get_device_properties, is_available, set_device, synchronize,
)
from .devices.streams import Event, Stream, current_stream, default_stream, set_stream, stream  # noqa: E402
from .memory import (  # noqa: E402
    empty_cache, max_memory_allocated, max_memory_reserved, mem_get_info, memory_allocated, memory_reserved,
    memory_stats, memory_summary, reset_accumulated_memory_stats, reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from .memory.fault_injection import inject_oom  # noqa: E402
from .execution import adaptive_eager, compile_cache, dtype_policy, native_ops, tracking  # noqa: E402
from .execution.numerics import numerics  # noqa: E402
from .execution.tracking import (  # noqa: E402
    clear_op_tracking, get_executed_ops, get_fallback_ops, get_op_counts, set_fallback_mode,
)
from .torch_neuronx import install_torch_neuronx_alias, metrics, neuron  # noqa: E402
from .migration_report.report import report  # noqa: E402
from .profiler.estimate import compare_adaptive_eager, estimate  # noqa: E402

__all__ = [
    # modules users reach as attributes
    "adaptive_eager", "autograd_exit", "compile_cache", "distributed", "dtype_policy", "flex_attention",
    "memory", "metrics", "native_ops", "neuron", "profiler", "random", "stream_check", "streams",
    "torch_neuronx", "tracking",
    # devices and streams (as torch.cuda names them)
    "current_device", "device", "device_count", "get_device_properties", "is_available", "set_device",
    "synchronize", "Event", "Stream", "current_stream", "default_stream", "set_stream", "stream",
    # memory
    "empty_cache", "max_memory_allocated", "max_memory_reserved", "mem_get_info", "memory_allocated",
    "memory_reserved", "memory_stats", "memory_summary", "reset_accumulated_memory_stats",
    "reset_peak_memory_stats", "set_per_process_memory_fraction", "inject_oom",
    # op tracking
    "clear_op_tracking", "get_executed_ops", "get_fallback_ops", "get_op_counts", "set_fallback_mode",
    # the migration report, estimates, the torch_neuronx alias
    "report", "estimate", "compare_adaptive_eager", "install_torch_neuronx_alias",
]


def install() -> None:
    """The import-time setup, in its one order (importing the package runs it once):
    op tracking and the fallback logger first, so the ops later steps run are recorded;
    the random streams and autograd's exit handler; the native-op table and tracking
    rules, before anything reads them; the dtype rule, the compile cache and adaptive
    eager, which read the environment (after the table: adaptive eager's flush points are
    ops); torch_neuronx's metrics, then its environment switches (logging, fallback policy,
    the opt-in alias), which may use the metrics; the profiler's timing mode; the c10d
    backend; FlexAttention's device kernels last (they register over the loaded table)."""
    tracking._install()
    random._install()
    autograd_exit._install()
    native_ops._load_default()
    dtype_policy._install()
    compile_cache._install()
    adaptive_eager._install()
    metrics._install()
    torch_neuronx._configure()
    profiler._install()
    distributed._install()
    flex_attention.install()


install()

# torch.compile on neuron tensors selects the neuron backend; a new shape is a
# new static graph (torch_neuron_sim/compile/selection.py). Imports no Dynamo.
from .compile import selection as _compile_selection  # noqa: E402,F401
