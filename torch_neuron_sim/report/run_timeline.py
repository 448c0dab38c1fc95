"""The device timeline of a whole run, as the migration report keeps it: the
modelled time by bucket and per op, and the longest device events, read from the
profiler's timeline (profiler/) when the report stops."""
from __future__ import annotations

from typing import Any, Optional

from .. import profiler


class RunTimeline:
    """The device timeline of a whole run, for the migration report
    (``report --timeline trace.json`` also writes the Chrome/Perfetto trace).
    ``stop()`` sums the events up in C++ and returns a ``PendingTimeline``,
    whose ``to_dict()`` gives plain data, marked as an estimate: the modelled
    time by bucket and per op, and the ``keep`` longest events (start and
    duration in ms from the first event, on lanes "neuron:D stream S")."""

    def __init__(self, trace: Optional[str] = None, keep: int = 5000) -> None:
        self.trace = trace
        self.keep = keep
        self._timeline = profiler.Timeline()
        self._profile: Any = None

    def start(self) -> "RunTimeline":
        if self.trace:
            from torch.profiler import ProfilerActivity, profile
            self._profile = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])
            self._profile.__enter__()
        self._timeline.start()
        return self

    def stop(self) -> "PendingTimeline":
        from ..execution import adaptive_eager
        try:
            self._timeline.stop(events=False, longest=self.keep, later=True)
        finally:
            if self._profile is not None:
                self._profile.__exit__(None, None, None)
        if self._profile is not None:
            self._profile.export_chrome_trace(self.trace)
        return PendingTimeline(self._timeline.summary, adaptive_eager.enabled(), self.trace)


class PendingTimeline:
    """A run's timeline summed up, still in C++ (with the cost model its events
    were costed with): a report that is never read builds no Python objects
    from it."""

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
