"""The migration report: what a program would meet on Trainium.

    with torch_neuron_sim.report(html="report.html") as r:
        train()
    print(r.text())            # or r.data (a dict), r.to_json(); the page is written at exit

    python -m torch_neuron_sim report --html report.html train.py --epochs 1   # an unmodified script

It lists the ops that left the device (with counts and the user source lines
that issued them), the native ops, the 64-bit computations narrowed to 32
bits, unsupported features hit, peak HBM per device against capacity, and the
eager compilations (distinct op signatures) with the ops that saw many shapes,
the time spent per op (native, fallback, host copies), HBM in use over time,
and the simulated device timeline: every device event costed by the cost
model (an estimate, docs/profiling.md), with its total by bucket and per op.

One model, `Report.data` (a dict of plain values), feeds all three outputs:
text(), to_json() and the HTML page (page.py). Sections other parts of the package
add to `data` appear in the JSON as they are and on the page as tables (or a
timeline chart), without changes here; docs/migration-report.md says how.

Cost: native ops pay two clock reads while a report is active (their
counters always run in C++). A fallback op, while a report is active, calls
back into Python once to record the source line: the stack walk happens only
there. HBM over time comes from the allocator's memory history (sizes only,
no stacks), switched on for the report unless the program records it itself.
The device timeline costs each op its shapes and one locked append; its events
stay in C++ until the end, when they are summed in chunks and only the longest
are kept for the page (run_timeline.py). start() and stop() each make one call
into C++ (report_window.cpp) that reads every counter, switches the recording
on or off and keeps what it read there; `data` is built from it when first
read. Both ends touch few Python objects: a report around large ops meets the
host's caches cold there (the ops streamed megabytes through them), where each
object and call costs its cache misses.
"""
from __future__ import annotations

import datetime
import json
import os
import sys
import sysconfig
import threading
import time
import traceback
from typing import Any, Optional

import torch

from .. import _C, memory
from ..execution import native_ops, numerics, tracking
from ..devices.device import machine as _machine
from ..distributed.collective_ops import POINT_TO_POINT_OPS
from .page_sections import TIMELINE_EVENTS
from .run_timeline import PendingTimeline, start_trace, stop_trace

MANY_SHAPES = 16  # an op compiled for at least this many signatures is a dynamic-shape risk
# HBM over time keeps at most this many points per device (per time slice
# its first, lowest, highest and last, so peaks survive): a run of a million
# allocations still makes a small JSON and page.
MEMORY_POINTS = 2000
# What stop() does with HBM over time (report_window.cpp): nothing (the
# program records no alloc/free trace), take the report's own trace, or sum up
# the program's since the start.
_HBM_NONE, _HBM_TAKEN, _HBM_SINCE = 0, 1, 2

_PKG_DIRS = tuple(os.path.dirname(p) + os.sep for p in (torch.__file__, __file__))
_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep
_active: Optional["Report"] = None
_lock = threading.Lock()


def _user_site() -> str:
    """The innermost frame outside torch, this package and the standard
    library: the user's line that issued the op."""
    f = sys._getframe(0)  # our own frames are skipped below
    while f is not None:
        path = f.f_code.co_filename
        if not (path.startswith(_PKG_DIRS) or path.startswith(_STDLIB) or path.startswith("<frozen")):
            return f"{path}:{f.f_lineno}"
        f = f.f_back
    # No Python frame: the autograd engine runs backward ops on its own thread.
    return "<backward pass>" if threading.current_thread() is not threading.main_thread() else "<unknown>"


# Ops run on several Python threads at once: a read-then-write of a count
# can lose another thread's increment (the GIL may switch between them).
_sites_lock = threading.Lock()


def _record_fallback(op_name: str) -> None:
    r = _active
    if r is not None:
        key = (op_name, _user_site())
        with _sites_lock:
            r._sites[key] = r._sites.get(key, 0) + 1


def _record_collective(op_name: str, nbytes: int) -> None:
    r = _active
    if r is not None:
        key = (op_name, _user_site())
        with _sites_lock:
            r._collective_sites[key] = r._collective_sites.get(key, 0) + 1
            r._collective_bytes[key] = r._collective_bytes.get(key, 0) + nbytes


def _record_rounding(op_name: str) -> None:
    r = _active
    if r is not None:
        key = (op_name, _user_site())
        r._rounding_sites[key] = r._rounding_sites.get(key, 0) + 1


# C++ calls these only while a report is active (reportActive()): set once.
_C._set_fallback_reporter(_record_fallback)
_C._set_collective_reporter(_record_collective)
numerics.set_rounding_reporter(_record_rounding)

_graphs: Any = None  # compile.graphs, imported when the first report starts


def _graph_state() -> dict[str, Any]:
    global _graphs
    if _graphs is None:
        from ..compile import graphs
        _graphs = graphs
    return _graphs.state()


def _torch_compile(before: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """torch.compile(backend="neuron") inside the window: each graph (name,
    forward/backward/inference, node count, compiled or run eagerly and why,
    NEFF cache outcome, Dynamo's recompile reason, launches) and Dynamo's
    graph breaks with their reasons."""
    from ..compile import graphs
    recs = [r.as_dict() for r in graphs.records()[before["graphs"]:]]
    breaks = [{"reason": reason, "count": n - before["graph_breaks"].get(reason, 0)}
              for reason, n in now["graph_breaks"].items() if n - before["graph_breaks"].get(reason, 0)]
    return {"graphs": recs,
            "compiled_graphs": sum(1 for r in recs if r["executor"] != "eager-fallback"),
            "fallback_graphs": sum(1 for r in recs if r["executor"] == "eager-fallback"),
            "recompiles": sum(1 for r in recs if r["recompile_reason"]),
            "graph_breaks": sorted(breaks, key=lambda b: (-b["count"], b["reason"]))}


def _series(pending: Any) -> list[dict[str, Any]]:
    # bytes: allocated (live blocks in their size classes), reserved_bytes:
    # the segments; the same definitions as the memory cards' peaks, to the µs
    # and in whole bytes (usage_series.cpp).
    return [{"device": f"neuron:{u['device']}", "events": u["events"], "downsampled": u["downsampled"],
             "seconds": u["seconds"], "bytes": u["bytes"], "reserved_bytes": u["reserved"]}
            for u in (pending.dicts() if pending is not None else [])]


class Report:
    """Collects while active (between start() and stop(), or as a context
    manager); `data` holds the result afterwards. Counts are the activity
    inside the window; peak HBM is measured from start() (the peaks are reset).

    start() and stop() each read the counters in one call into C++ and keep
    what they read there; `data` is built from it when first read, so a report
    per training step that is never read costs the step little."""

    def __init__(self, many_shapes: int = MANY_SHAPES, html: Optional[str] = None, trace: Optional[str] = None):
        self.many_shapes = many_shapes
        self._data: Optional[dict[str, Any]] = {}
        self.error: Optional[str] = None
        self.traceback: Optional[str] = None
        self.html = html
        self.trace = trace
        self._sites: dict[tuple[str, str], int] = {}  # (op, site) -> fallback calls
        self._collective_sites: dict[tuple[str, str], int] = {}  # (c10d op, site) -> calls
        self._rounding_sites: dict[tuple[str, str], int] = {}  # (integer op, site) -> calls that reached 2^24
        self._collective_bytes: dict[tuple[str, str], int] = {}  # (c10d op, site) -> bytes
        self._profile: Any = None  # torch.profiler's session, with `trace`

    # ---- collecting ------------------------------------------------------------
    def start(self) -> "Report":
        global _active
        with _lock:
            if _active is not None:
                raise RuntimeError("a torch_neuron_sim report is already active in this process")
            _active = self
        self._started = (time.time(), time.perf_counter())
        self._graphs_before = _graph_state()
        if self.trace:
            self._profile = start_trace()
        # HBM over time comes from the allocator's trace (sizes only), switched
        # on for the report unless the program records one itself: then the
        # report reads the same trace, if it records every action ("all").
        mode = memory._history_mode
        self._hbm_owned, self._hbm_readable = mode is None, mode in (None, "all")
        # The counters (peaks reset: a report's peaks are its own), the
        # allocator's trace, the device timeline's recorder, the report active.
        self._window = _C._report_start(record_sizes=self._hbm_owned)
        return self

    def stop(self) -> "Report":
        global _active
        # What the window saw, read now and kept as it is in C++; _collect()
        # makes the data of it when `data` is first read. A trace only the
        # report reads is taken whole (and its recording switched off, unless
        # the program started its own meanwhile); one the program reads is
        # summed up now and left to it.
        alone = self._hbm_owned and memory._history_mode is None
        hbm = (_HBM_TAKEN if alone else _HBM_SINCE) if self._hbm_readable else _HBM_NONE
        stopped = False
        try:
            self._window.stop(hbm=hbm, record_sizes_off=alone, keep_events=TIMELINE_EVENTS,
                              memory_points=MEMORY_POINTS)
            stopped = True
        finally:
            with _lock:
                _active = None
            if self._profile is not None:
                stop_trace(self._profile, self.trace if stopped else None)
        self._wall_seconds = time.perf_counter() - self._started[1]
        graphs_now = _graph_state()
        # Graphs change (launch counts grow) after the window: their records are read now.
        self._torch_compile = _torch_compile(self._graphs_before, graphs_now) if graphs_now != self._graphs_before else None
        self._native_op_table = native_ops.version()
        self._outcome = (self.error, self.traceback)
        self._data = None
        if self.html:
            self.write_html(self.html)
        return self

    @property
    def data(self) -> dict[str, Any]:
        if self._data is None:
            self._data = self._collect()
        return self._data

    @data.setter
    def data(self, value: dict[str, Any]) -> None:
        self._data = value

    def __enter__(self) -> "Report":
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is not None:
            self.error = f"{exc_type.__name__}: {exc}"
            self.traceback = "".join(traceback.format_exception(exc_type, exc, tb))
        self.stop()
        return False

    def _collect(self) -> dict[str, Any]:
        w = self._window
        before, now = w.before, w.now
        keys = ("executed", "fallbacks", "downcasts_f64", "downcasts_i64", "compilations", "cache_hits", "time_ns",
                "copy_ns", "copied_bytes")
        delta = {row[0]: dict(zip(keys, row[1:])) for row in _C._report_op_deltas(before, now)}
        sites: dict[str, list] = {}
        for (op, site), n in sorted(self._sites.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1])):
            sites.setdefault(op, []).append({"site": site, "count": n})
        # Times are this machine's wall time inside the op (the CPU kernel on
        # arena memory, or the fallback's host kernel and its copies).
        fallback = [{"op": op, "count": d["fallbacks"], "sites": sites.get(op, []),
                     "bytes_copied": d["copied_bytes"], "seconds": d["time_ns"] / 1e9,
                     "copy_seconds": d["copy_ns"] / 1e9}
                    for op, d in sorted(delta.items(), key=lambda kv: (-kv[1]["fallbacks"], kv[0])) if d["fallbacks"]]
        native = [{"op": op, "count": d["executed"], "seconds": d["time_ns"] / 1e9}
                  for op, d in sorted(delta.items(), key=lambda kv: (-kv[1]["executed"], kv[0])) if d["executed"]]
        # NKI kernel launches are recorded by op tracking as nki_<kernel name>.
        nki_kernels = [{"kernel": op, "count": d["executed"]} for op, d in sorted(delta.items())
                       if op.startswith("nki_") and d["executed"]]
        downcasts = [{"op": op, "float64": d["downcasts_f64"], "int64": d["downcasts_i64"]}
                     for op, d in sorted(delta.items()) if d["downcasts_f64"] or d["downcasts_i64"]]
        unsupported_before = dict(before.unsupported)
        unsupported = [{"feature": f, "count": n - unsupported_before.get(f, 0)}
                       for f, n in now.unsupported if n - unsupported_before.get(f, 0)]
        m = _machine()  # the device table is fixed at its first use, long before any report stops
        cap = m["hbm_per_device"]  # every device's total_memory (get_device_properties)
        # The capacity check reads reserved bytes: the caching allocator's
        # segments are what must fit on the device, free blocks included.
        memory = [{"device": f"neuron:{i}", "peak_bytes": peak, "peak_reserved_bytes": reserved,
                   "capacity_bytes": cap, "fraction": reserved / cap}
                  for i, (peak, reserved) in enumerate(zip(now.peak, now.peak_reserved)) if peak]
        collectives: dict[str, dict[str, Any]] = {}
        for (op, site), n in sorted(self._collective_sites.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1])):
            c = collectives.setdefault(op, {"op": op, "count": 0, "bytes": 0, "sites": []})
            nbytes = self._collective_bytes[(op, site)]
            c["count"] += n
            c["bytes"] += nbytes
            c["sites"].append({"site": site, "count": n, "bytes": nbytes})
        # Integer ops the device computes in fp32 whose values reached 2^24 (docs/numerics.md).
        rounding: dict[str, dict[str, Any]] = {}
        for (op, site), n in sorted(self._rounding_sites.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1])):
            c = rounding.setdefault(op, {"op": op, "count": 0, "sites": []})
            c["count"] += n
            c["sites"].append({"site": site, "count": n})
        signatures = sum(d["compilations"] for d in delta.values())
        many = [{"op": op, "signatures": d["compilations"]}
                for op, d in sorted(delta.items(), key=lambda kv: (-kv[1]["compilations"], kv[0]))
                if d["compilations"] >= self.many_shapes]
        copies = [n - b for n, b in zip(now.host_copies, before.host_copies)]  # count, bytes, ns
        started = datetime.datetime.fromtimestamp(self._started[0]).astimezone()
        error, tb = self._outcome
        return {
            "native_op_table": self._native_op_table,
            "dtype_policy": w.dtype_policy,
            "run": {"started": started.isoformat(timespec="seconds"), "wall_seconds": self._wall_seconds,
                    "torch": torch.__version__, "torch_neuron_sim": _version()},
            "profile": {"name": m["profile"], "devices": len(now.peak), "hbm_per_device_bytes": cap},
            "fallback_ops": fallback,
            "native_ops": native,
            "nki_kernels": nki_kernels,
            "downcasts_64bit": downcasts,
            "host_casts_64bit": now.host_casts64 - before.host_casts64,
            "host_copies": {"count": copies[0], "bytes": copies[1], "seconds": copies[2] / 1e9},
            "unsupported_features": unsupported,
            "would_round_on_trainium": sorted(rounding.values(), key=lambda c: (-c["count"], c["op"])),
            "collectives": sorted((c for c in collectives.values() if c["op"] not in POINT_TO_POINT_OPS),
                                  key=lambda c: (-c["bytes"], c["op"])),
            "point_to_point": sorted((c for c in collectives.values() if c["op"] in POINT_TO_POINT_OPS),
                                     key=lambda c: (-c["bytes"], c["op"])),
            "memory": memory,
            "memory_timeline": _series(w.usage),
            "compilation": {"distinct_signatures": signatures,
                            "cache_hits": sum(d["cache_hits"] for d in delta.values()),
                            "simulated_ms_per_compile": w.compile_latency_ms,
                            "ops_with_many_shapes": many, "many_shapes_threshold": self.many_shapes},
            "torch_compile": self._torch_compile or {"graphs": [], "compiled_graphs": 0, "fallback_graphs": 0,
                                                     "recompiles": 0, "graph_breaks": []},
            "device_timeline": PendingTimeline(w.timeline, w.adaptive_eager, self.trace).to_dict(),
            "error": error,
            "traceback": tb,
        }

    # ---- output ----------------------------------------------------------------
    @property
    def fallback_ops(self) -> list[str]:
        return [f["op"] for f in self.data.get("fallback_ops", [])]

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self.data, indent=indent)

    def to_html(self) -> str:
        """The report as one self-contained HTML page (charts, sortable tables)."""
        from .page import render
        return render(self.data)

    def write_html(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_html())

    def text(self) -> str:
        """The report as plain text (what `python -m torch_neuron_sim report` prints)."""
        from .text import render_text
        return render_text(self.data)


def _version() -> str:
    from .. import __version__
    return __version__


def report(many_shapes: int = MANY_SHAPES, html: Optional[str] = None, trace: Optional[str] = None) -> Report:
    """A report to use as a context manager: `with torch_neuron_sim.report() as r:`.

    :param many_shapes: flag ops compiled for at least this many distinct signatures.
    :param html: if given, the path the HTML page is written to when the block exits
        (also when it raises: the page then shows the traceback).
    :param trace: if given, the run is also profiled (torch.profiler, CPU and neuron rows)
        and its Chrome/Perfetto trace written to this path (docs/profiling.md).
    """
    return Report(many_shapes, html, trace)
