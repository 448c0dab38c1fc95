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

# The package is laid out by concept, as csrc/ is (docs/architecture.md, "Layer 3"):
# device/, memory/, execution/, profiler/, report/, compile/, distributed/, testing/,
# and torch_neuronx/ (the torch_neuronx API and torch.neuron). These are the public names.
from . import memory, profiler  # noqa: E402
from .device import autograd_exit, random, stream_check, streams  # noqa: E402
from .device.device import (  # noqa: E402
    current_device, device, device_count, get_device_properties, is_available, set_device, synchronize,
)
from .device.streams import Event, Stream, current_stream, default_stream, set_stream, stream  # noqa: E402
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

tracking._install()
random._install()
autograd_exit._install()
native_ops._load_default()

# Trainium semantics and the migration report (docs/semantics.md, docs/migration-report.md)
from . import torch_neuronx  # noqa: E402
from .torch_neuronx import install_torch_neuronx_alias, metrics, neuron  # noqa: E402
from .report.report import report  # noqa: E402

# The simulated device timeline (docs/profiling.md)
from .profiler.estimate import compare_adaptive_eager, estimate  # noqa: E402

dtype_policy._install()
compile_cache._install()
adaptive_eager._install()
metrics._install()
torch_neuronx._configure()
profiler._install()

# Distributed: the c10d backend "neuron" (docs/distributed.md)
from . import distributed  # noqa: E402

distributed._install()

# FlexAttention on the device: torch's device check widened for neuron, the
# decomposition as the device's kernel (torch_neuron_sim/flex_attention/)
from . import flex_attention  # noqa: E402

flex_attention.install()

# torch.compile on neuron tensors selects the neuron backend; a new shape is a
# new static graph (torch_neuron_sim/compile/selection.py). Imports no Dynamo.
from .compile import selection as _compile_selection  # noqa: E402

# Module paths from before the package was laid out by concept still import
# (`import torch_neuron_sim.metrics`, `from torch_neuron_sim.stream_check import ...`).
_MOVED_MODULES = {
    "streams": streams, "stream_check": stream_check, "random": random, "tracking": tracking,
    "dtype_policy": dtype_policy, "compile_cache": compile_cache, "native_ops": native_ops,
    "metrics": metrics, "neuron": neuron,
}


def _alias_moved_modules() -> None:
    import importlib
    import sys
    for old, module in _MOVED_MODULES.items():
        sys.modules.setdefault(f"{__name__}.{old}", module)
    for old, new in {"cuda_map": "device.cuda_map", "fault_injection": "memory.fault_injection",
                     "estimate": "profiler.estimate", "report_html": "report.page",
                     "torch_neuronx_utils": "torch_neuronx.utils"}.items():
        sys.modules.setdefault(f"{__name__}.{old}", importlib.import_module(f"{__name__}.{new}"))


_alias_moved_modules()
