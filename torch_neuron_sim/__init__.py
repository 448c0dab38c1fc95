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


import os  # noqa: E402

import torch  # noqa: E402

# torch_neuronx sets this on import; "1" (launches block until the op is
# done) is what the emulator does. See docs/streams.md.
os.environ.setdefault("NEURON_LAUNCH_BLOCKING", "1")

from . import _C  # loads the C++ core: allocator, guard, hooks, kernels

__version__ = "0.1.0"


def _register() -> None:
    if torch._C._get_privateuse1_backend_name() != "neuron":
        torch.utils.rename_privateuse1_backend("neuron")
    from . import neuron as _neuron_module

    torch._register_device_module("neuron", _neuron_module)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_storage=True, unsupported_dtype=None)


_register()

from . import memory, native_ops, neuron, random, tracking  # noqa: E402
from .device import (  # noqa: E402
    current_device, device, device_count, get_device_properties, is_available, set_device, synchronize,
)
from .memory import (  # noqa: E402
    empty_cache, max_memory_allocated, max_memory_reserved, mem_get_info, memory_allocated, memory_reserved,
    memory_stats, memory_summary, reset_accumulated_memory_stats, reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from .fault_injection import inject_oom  # noqa: E402
from .tracking import (  # noqa: E402
    clear_op_tracking, get_executed_ops, get_fallback_ops, get_op_counts, set_fallback_mode,
)
from .streams import (  # noqa: E402
    Event, Stream, current_stream, default_stream, set_stream, stream,
)

tracking._install()
random._install()
native_ops._load_default()

# Trainium semantics and the migration report (docs/semantics.md, docs/migration-report.md)
from . import compile_cache, dtype_policy, metrics, torch_neuronx  # noqa: E402
from .torch_neuronx import install_torch_neuronx_alias  # noqa: E402
from .report import report  # noqa: E402

# The simulated device timeline (docs/profiling.md)
from . import profiler  # noqa: E402
from .estimate import estimate  # noqa: E402

dtype_policy._install()
compile_cache._install()
metrics._install()
torch_neuronx._configure()
profiler._install()

# Distributed: the c10d backend "neuron" (docs/distributed.md)
from . import distributed  # noqa: E402

distributed._install()
