"""torch.neuron: the device module PyTorch finds for the `neuron` device
(torch._register_device_module), shaped like torch.cuda with torch_neuronx's
function set (the real `torch_neuronx/neuron.py`)."""
from .. import memory
from ..devices.device import (
    NeuronDeviceProperties, _index, _is_in_bad_fork, _lazy_init, _sleep, current_device, device, device_count,
    get_amp_supported_dtype, get_device_capability, get_device_name, init, is_available, is_bf16_supported,
    is_initialized, synchronize,
)
from ..memory import (
    caching_allocator_alloc, caching_allocator_delete, empty_cache, max_memory_allocated, max_memory_cached,
    max_memory_reserved, mem_get_info, memory_allocated, memory_cached, memory_reserved, memory_stats,
    memory_stats_as_nested_dict, memory_summary, reset_accumulated_memory_stats, reset_max_memory_allocated,
    reset_max_memory_cached, reset_peak_memory_stats, get_per_process_memory_fraction, memory_snapshot,
    set_per_process_memory_fraction,
)
from ..devices.random import (
    get_rng_state, get_rng_state_all, initial_seed, manual_seed, manual_seed_all, seed, seed_all,
    set_rng_state, set_rng_state_all,
)
from ..devices.streams import (
    Event, Stream, StreamContext, current_stream, default_stream, query, record_event, set_stream, stream,
    wait_event, wait_stream,
)
from . import get_dynamo_metrics, reset_dynamo_metrics  # torch.compile graph metrics (compile/)


# As torch_neuronx's neuron.py: these go through the torch_neuronx module (the
# emulator's API, which `import torch_neuronx` resolves to under the alias) and
# look up current_device in this module when they call it, so tests that patch
# torch_neuronx.set_device, torch_neuronx._C._neuron_getDeviceProperties or
# torch_neuronx.neuron.current_device see the calls they expect.
def set_device(device) -> None:
    """Set the current neuron device: an index, a torch.device or "neuron:i" (None: the current one)."""
    from .. import torch_neuronx

    torch_neuronx.set_device(current_device() if device is None else _index(device))


def get_device_properties(device=None):
    """name (the instance family) and total_memory (HBM bytes per device) of a device."""
    from .. import torch_neuronx

    return torch_neuronx.get_device_properties(current_device() if device is None else device)
