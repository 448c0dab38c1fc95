"""The real backend's torch.compile metrics: one NeuronCompilationMetrics
per compiled graph (torch.neuron.get_dynamo_metrics()), the Dynamo counters
counters["neuron"]["compiled_graphs"] / ["graphs_with_collectives"], and the
compile phases in torch._dynamo.utils.compilation_time_metrics (seconds),
which torch._dynamo.utils.compile_times() prints:
  torch_neuronx_fx_passes   graph rewrites before lowering (64-bit narrowing)
  torch_neuronx_lower       checking the graph against the device (native ops, cache key)
  torch_neuronx_compile     producing the executable (Inductor / cache load / simulated latency)
Counters live in Dynamo's `counters`, which survives torch._dynamo.reset()
(as on the device); reset_dynamo_metrics() clears them."""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Callable, Optional

_lock = threading.Lock()
_records: list["NeuronCompilationMetrics"] = []
_listeners: list[Callable[["NeuronCompilationMetrics"], None]] = []

PHASES = ("torch_neuronx_fx_passes", "torch_neuronx_lower", "torch_neuronx_compile")


@dataclasses.dataclass
class NeuronCompilationMetrics:
    """One compiled graph, with the field names of torch_neuronx."""
    graph_id: str = ""
    graph_name: str = ""
    model_name: str = ""
    has_collectives: bool = False
    graph_node_count: int = 0
    timestamp: float = dataclasses.field(default_factory=time.time)
    torch_neuronx_fx_passes_us: float = 0.0
    torch_neuronx_lower_us: float = 0.0
    torch_neuronx_compile_us: float = 0.0


def _counters():
    from torch._dynamo.utils import counters
    return counters


def record_phase(phase: str, seconds: float) -> None:
    from torch._dynamo.utils import compilation_time_metrics
    compilation_time_metrics.setdefault(phase, []).append(seconds)


def record_compilation(m: NeuronCompilationMetrics) -> None:
    c = _counters()
    with _lock:
        _records.append(m)
        c["neuron"]["compiled_graphs"] += 1
        if m.has_collectives:
            c["neuron"]["graphs_with_collectives"] += 1
        listeners = list(_listeners)
    for fn in listeners:
        fn(m)


def add_listener(fn: Callable[[NeuronCompilationMetrics], None]) -> Callable[[], None]:
    """Call fn(metrics) after each graph compilation (the profiler turns
    them into device events). Returns a function that removes it."""
    with _lock:
        _listeners.append(fn)

    def remove() -> None:
        with _lock:
            if fn in _listeners:
                _listeners.remove(fn)
    return remove


def get_dynamo_metrics() -> list[NeuronCompilationMetrics]:
    """torch.neuron.get_dynamo_metrics(): every graph compiled since the last reset."""
    with _lock:
        return list(_records)


def reset_dynamo_metrics() -> None:
    """torch.neuron.reset_dynamo_metrics(): forget the records and the counters."""
    with _lock:
        _records.clear()
    import sys
    if "torch._dynamo" in sys.modules:  # nothing was compiled if Dynamo never loaded
        c = _counters()
        c["neuron"].clear()


