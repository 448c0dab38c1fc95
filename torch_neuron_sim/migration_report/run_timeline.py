"""The device timeline of a whole run, as the migration report keeps it: the
modelled time by bucket and per op, and the longest device events, summed up
in C++ from the profiler's timeline (profiler/) when the report stops
(report_window.cpp); and, with ``report(trace=...)``, the run profiled by
torch.profiler too, its Chrome/Perfetto trace written when the report stops."""
from __future__ import annotations

from typing import Any, Optional


def start_trace() -> Any:
    """torch.profiler's session (CPU and neuron rows), entered."""
    from torch.profiler import ProfilerActivity, profile
    session = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])
    session.__enter__()
    return session


def stop_trace(session: Any, path: Optional[str]) -> None:
    """Leaves the session and writes its trace to `path` (None: the report's
    stop failed; the session is left all the same)."""
    session.__exit__(None, None, None)
    if path is not None:
        session.export_chrome_trace(path)


class PendingTimeline:
    """A run's timeline summed up, still in C++ (with the cost model its events
    were costed with): a report that is never read builds no Python objects
    from it. ``to_dict()`` gives plain data, marked as an estimate: the
    modelled time by bucket and per op, and the longest events (start and
    duration in ms from the first event, on lanes "neuron:D stream S")."""

    def __init__(self, summary: Any, adaptive_eager: bool, trace: Optional[str]) -> None:
        self._summary = summary
        self._adaptive_eager = adaptive_eager
        self._trace = trace

    def to_dict(self) -> dict:
        from ..profiler.estimate import from_summary
        summary, m = self._summary.dict(), self._summary.model()
        d = from_summary(summary, m["profile"], m["lnc"], model=m, adaptive_eager=self._adaptive_eager).to_dict()
        d["events"] = summary["longest"].dicts()
        d["events_total"] = summary["count"]
        d["trace"] = self._trace
        return d
