"""The device timeline of a whole run, as the migration report keeps it: the
modelled time by bucket and per op, and the longest device events, read from the
profiler's timeline (profiler/) when the report stops."""
from __future__ import annotations

from typing import Any, Optional

from .. import profiler


class RunTimeline:
    """The device timeline of a whole run, for the migration report
    (``report --timeline trace.json`` also writes the Chrome/Perfetto trace).
    ``stop()`` returns plain data, marked as an estimate: the modelled time
    by bucket and per op, and the ``keep`` longest device events (start and
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

    def stop(self, drawn_later: bool = False) -> dict:
        """With ``drawn_later`` the events stay in C++: ``d["events"]`` is
        then an object whose ``dicts()`` returns them (the report calls it
        when its data is first read)."""
        from ..profiler.estimate import from_summary
        try:
            self._timeline.stop(events=False, longest=self.keep, drawn=True)
        finally:
            if self._profile is not None:
                self._profile.__exit__(None, None, None)
        if self._profile is not None:
            self._profile.export_chrome_trace(self.trace)
        m = profiler.cost_model()
        summary = self._timeline.summary_or_empty()
        d = from_summary(summary, m["profile"], m["lnc"], model=m).to_dict()
        d["events"] = summary["longest"] if drawn_later else summary["longest"].dicts()
        d["events_total"] = summary["count"]
        d["trace"] = self.trace
        return d
