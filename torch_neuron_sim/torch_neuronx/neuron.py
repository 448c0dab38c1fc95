"""torch.neuron: the device module PyTorch finds for the `neuron` device
(torch._register_device_module), shaped like torch.cuda with torch_neuronx's
function set (the real `torch_neuronx/neuron.py`)."""
from .. import memory
from ..device.device import (
    NeuronDeviceProperties, _is_in_bad_fork, _lazy_init, _sleep, current_device, device, device_count,
    get_amp_supported_dtype, get_device_capability, get_device_name, get_device_properties, init,
    is_available, is_bf16_supported, is_initialized, set_device, synchronize,
)
from ..memory import (
    empty_cache, max_memory_allocated, max_memory_reserved, mem_get_info, memory_allocated, memory_reserved,
    memory_stats, memory_summary, reset_accumulated_memory_stats, reset_max_memory_allocated,
    reset_peak_memory_stats, get_per_process_memory_fraction, memory_snapshot, set_per_process_memory_fraction,
)
from ..device.random import (
    get_rng_state, get_rng_state_all, initial_seed, manual_seed, manual_seed_all, seed, seed_all,
    set_rng_state, set_rng_state_all,
)
from ..device.streams import (
    Event, Stream, StreamContext, current_stream, default_stream, query, record_event, set_stream, stream,
    wait_event, wait_stream,
)
from . import get_dynamo_metrics, reset_dynamo_metrics  # torch.compile graph metrics (compile/)
