"""The registry of compiled graphs, for the migration report and for users:
each graph's name, kind (forward / backward / inference), node count, what
became of it (compiled, or run eagerly because an op has no device lowering),
the NEFF cache outcome, why Dynamo recompiled, and how often it launched."""
from __future__ import annotations

import dataclasses
import threading
from typing import Any, Optional

from .. import metrics

_lock = threading.Lock()
_records: list["GraphRecord"] = []


@dataclasses.dataclass
class GraphRecord:
    name: str
    kind: str
    graph_id: str
    node_count: int
    device: str
    executor: str                      # "inductor", "graph" or "eager-fallback"
    recompile_reason: Optional[str] = None
    fallback_ops: list[str] = dataclasses.field(default_factory=list)
    cache: str = ""                    # "compiled", "memory", "persistent" ("" for a fallback graph)
    neff_bytes: int = 0
    compile_seconds: float = 0.0
    launches: int = 0

    def note_launch(self) -> None:
        self.launches += 1  # one Python increment: the GIL makes it atomic enough for a count
        metrics._note_graph("CompiledGraph.Launches")

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def add(record: GraphRecord) -> None:
    with _lock:
        _records.append(record)


def records() -> list[GraphRecord]:
    with _lock:
        return list(_records)


def clear() -> None:
    with _lock:
        _records.clear()


def graph_breaks() -> dict[str, int]:
    """Dynamo's graph breaks so far, reason -> count (counters["graph_break"])."""
    import sys
    if "torch._dynamo" not in sys.modules:
        return {}
    from torch._dynamo.utils import counters
    return dict(counters["graph_break"])
