"""The one record of each graph torch.compile(backend="neuron") compiled: its
name, kind (forward / backward / inference), node count, what became of it
(compiled, or run eagerly because an op has no device lowering), the NEFF cache
outcome, its compile phases, why Dynamo recompiled, and how often it launched.
The migration report reads these records; torch.neuron.get_dynamo_metrics()
shows the compiled ones under torch_neuronx's field names (dynamo_metrics.py);
Dynamo's counters["neuron"] are counted when a record is added."""
from __future__ import annotations

import dataclasses
import sys
import threading
import time
from typing import Any, Callable, Optional

from ..torch_neuronx import metrics

_lock = threading.Lock()
_records: list["GraphRecord"] = []
_listeners: list[Callable[["GraphRecord"], None]] = []
_metrics_from = 0  # records before this index predate reset_dynamo_metrics()


@dataclasses.dataclass
class GraphRecord:
    name: str
    kind: str
    graph_id: str
    node_count: int
    device: str
    executor: str                      # "inductor", "graph" or "eager-fallback"
    model_name: str = ""
    has_collectives: bool = False
    recompile_reason: Optional[str] = None
    fallback_ops: list[str] = dataclasses.field(default_factory=list)
    cache: str = ""                    # "compiled", "memory", "persistent" ("" for a fallback graph)
    neff_bytes: int = 0
    compile_seconds: float = 0.0
    phase_seconds: dict[str, float] = dataclasses.field(default_factory=dict)  # fx_passes, lower, compile
    timestamp: float = dataclasses.field(default_factory=time.time)
    launches: int = 0

    @property
    def compiled(self) -> bool:
        return self.executor != "eager-fallback"

    def note_launch(self) -> None:
        self.launches += 1  # one Python increment: the GIL makes it atomic enough for a count
        metrics._note_graph("CompiledGraph.Launches")

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def add(record: GraphRecord) -> None:
    """Keeps the record; a compiled graph also counts in Dynamo's
    counters["neuron"] and reaches the listeners."""
    with _lock:
        _records.append(record)
        listeners = list(_listeners) if record.compiled else []
    if record.compiled:
        from torch._dynamo.utils import counters
        counters["neuron"]["compiled_graphs"] += 1
        if record.has_collectives:
            counters["neuron"]["graphs_with_collectives"] += 1
    for fn in listeners:
        fn(record)


def records() -> list[GraphRecord]:
    with _lock:
        return list(_records)


def compiled_since_metrics_reset() -> list[GraphRecord]:
    with _lock:
        return [r for r in _records[_metrics_from:] if r.compiled]


def reset_metrics() -> None:
    """Later get_dynamo_metrics() calls start from here; Dynamo's
    counters["neuron"] start again from zero. The report's records stay."""
    global _metrics_from
    with _lock:
        _metrics_from = len(_records)
    if "torch._dynamo" in sys.modules:  # nothing was compiled if Dynamo never loaded
        from torch._dynamo.utils import counters
        counters["neuron"].clear()


def clear() -> None:
    global _metrics_from
    with _lock:
        _records.clear()
        _metrics_from = 0


def add_listener(fn: Callable[[GraphRecord], None]) -> Callable[[], None]:
    """Call fn(record) after each graph compilation. Returns a function that removes it."""
    with _lock:
        _listeners.append(fn)

    def remove() -> None:
        with _lock:
            if fn in _listeners:
                _listeners.remove(fn)
    return remove


_dynamo_counters: Any = None  # torch._dynamo.utils.counters, kept once Dynamo is loaded


def graph_breaks() -> dict[str, int]:
    """Dynamo's graph breaks so far, reason -> count (counters["graph_break"])."""
    global _dynamo_counters
    if _dynamo_counters is None:
        if "torch._dynamo" not in sys.modules:
            return {}
        from torch._dynamo.utils import counters
        _dynamo_counters = counters  # one object for the process: Dynamo clears it in place
    return dict(_dynamo_counters["graph_break"])


def state() -> dict[str, Any]:
    """How many records there are and the graph breaks so far, in one call:
    the migration report reads both at each end, where every call costs
    (docs/migration-report.md, "How it is collected")."""
    with _lock:
        n = len(_records)
    return {"graphs": n, "graph_breaks": graph_breaks()}
