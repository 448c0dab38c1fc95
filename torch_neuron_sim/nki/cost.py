"""An NKI launch on the device timeline. The engines' work a launch counted
(launch.EngineWork) goes to the C++ cost model (runtime/engine_cost.h: the
profile's peak FLOPs per dtype, its HBM bandwidth, the engines' clock and
issue cost), which prices it engine by engine; when a profiler, estimate()
or report is recording, the launch is one device event named
`nki_<kernel>`. The per-engine seconds of every launch are kept here too, so
estimate() and the profiler can show where a kernel's time goes."""
from __future__ import annotations

import threading
from typing import Optional

from .. import profiler
from .launch import ENGINES, EngineWork

_lock = threading.Lock()
_totals: dict = {}  # "nki_<kernel>" -> {"count", "seconds", engine: seconds, "sbuf_peak"}
_recent: dict = {}  # (name, issue_ns) -> seconds per engine, of launches while the timeline records
_RECENT_MAX = 100_000


def _work_tuple(work: EngineWork) -> tuple:
    instructions = [float(work.instructions[e]) for e in ENGINES]
    elements = [float(work.cycles_elems.get(e, 0.0)) for e in ENGINES]
    flops = [work.flops["float8"], work.flops["bfloat16"], work.flops["float32"]]
    return (instructions, elements, flops, float(work.dma_bytes))


def constants() -> dict:
    """The engine model's assumptions: engine_hz, issue_cycles (per instruction), dma_fixed_s (per DMA)."""
    from .. import _C
    return dict(_C._prof_nki_constants())


def estimate(work: EngineWork) -> dict:
    """The model's cost of a launch's work: seconds, launch_seconds, bound, engines {name: seconds}."""
    from .. import _C
    return _C._prof_nki_cost(_work_tuple(work))


def record_launch(kernel_name: str, work: EngineWork, device: Optional[int], issue_ns: Optional[int] = None,
                  sbuf_peak: int = 0) -> dict:
    """Records one launch: a device event (when the timeline records) and the per-engine totals."""
    from .. import _C
    name = f"nki_{kernel_name}"
    if issue_ns is None:
        issue_ns = profiler.now_ns()
    cost = _C._prof_record_nki_launch(name, -1 if device is None else int(device), int(issue_ns),
                                      _work_tuple(work))
    with _lock:
        if profiler.recording() and len(_recent) < _RECENT_MAX:
            _recent[(name, int(issue_ns))] = dict(cost["engines"])
        row = _totals.setdefault(name, dict({"count": 0, "seconds": 0.0, "instructions": 0, "sbuf_peak": 0},
                                            **dict.fromkeys(ENGINES, 0.0)))
        row["count"] += 1
        row["seconds"] += cost["seconds"]
        row["instructions"] += sum(work.instructions.values())
        row["sbuf_peak"] = max(row["sbuf_peak"], sbuf_peak)
        for engine, seconds in cost["engines"].items():
            row[engine] += seconds
    return cost


def annotate(events: list) -> None:
    """Adds `engines` (modelled seconds per engine) to the NKI launch events of a timeline."""
    with _lock:
        if not _recent:
            return
        for e in events:
            engines = _recent.pop((e.get("name"), e.get("issue_ns")), None)
            if engines is not None:
                e["engines"] = engines


def kernel_costs() -> dict:
    """Per NKI kernel since the last reset: launches, modelled seconds, seconds per engine, instructions."""
    with _lock:
        return {k: dict(v) for k, v in _totals.items()}


def reset() -> None:
    with _lock:
        _totals.clear()


profiler.add_event_annotator(annotate)
