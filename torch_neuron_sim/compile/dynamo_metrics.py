"""The real backend's torch.compile metrics over the one record of each graph
(graphs.py): torch.neuron.get_dynamo_metrics() gives a NeuronCompilationMetrics
per compiled graph, with torch_neuronx's field names; Dynamo's
counters["neuron"]["compiled_graphs"] / ["graphs_with_collectives"] count them;
the compile phases go to torch._dynamo.utils.compilation_time_metrics (seconds),
which torch._dynamo.utils.compile_times() prints:
  torch_neuronx_fx_passes   graph rewrites before lowering (64-bit narrowing)
  torch_neuronx_lower       checking the graph against the device (native ops, cache key)
  torch_neuronx_compile     producing the executable (Inductor / cache load / simulated latency)
Counters live in Dynamo's `counters`, which survives torch._dynamo.reset()
(as on the device); reset_dynamo_metrics() clears them."""
from __future__ import annotations

import dataclasses
import time
from typing import Callable

from . import graphs

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

    @classmethod
    def of(cls, r: graphs.GraphRecord) -> "NeuronCompilationMetrics":
        us = {f"{phase}_us": r.phase_seconds.get(phase, 0.0) * 1e6 for phase in PHASES}
        return cls(graph_id=r.graph_id, graph_name=r.name, model_name=r.model_name, has_collectives=r.has_collectives,
                   graph_node_count=r.node_count, timestamp=r.timestamp, **us)


def record_phase(record: graphs.GraphRecord, phase: str, seconds: float) -> None:
    from torch._dynamo.utils import compilation_time_metrics
    compilation_time_metrics.setdefault(phase, []).append(seconds)
    record.phase_seconds[phase] = seconds


def add_listener(fn: Callable[[NeuronCompilationMetrics], None]) -> Callable[[], None]:
    """Call fn(metrics) after each graph compilation (for profilers). Returns a
    function that removes it."""
    return graphs.add_listener(lambda record: fn(NeuronCompilationMetrics.of(record)))


def get_dynamo_metrics() -> list[NeuronCompilationMetrics]:
    """torch.neuron.get_dynamo_metrics(): every graph compiled since the last reset."""
    return [NeuronCompilationMetrics.of(r) for r in graphs.compiled_since_metrics_reset()]


def reset_dynamo_metrics() -> None:
    """torch.neuron.reset_dynamo_metrics(): forget the metrics and the counters."""
    graphs.reset_metrics()
