"""The sections of the migration report's page (page.py): one function per
section of the report's model, each adding its intro and a table or a Bokeh chart."""
from __future__ import annotations

import html
import json
from typing import Any, Iterable, Optional

import numpy as np


from .format import short_site, size

TABLE_ROWS = 1000  # rows per table on the page (the JSON keeps all)
TIMELINE_EVENTS = 5000  # device events the model keeps (--json): the longest ones
CHART_EVENTS = 2000  # events a timeline chart draws: the longest ones (more cost drawing time, not detail)
TIME_OPS = 25  # ops in the time-by-op chart: the slowest ones

# Sections rendered by name; anything else in the model is rendered generically.
_KNOWN = {"native_op_table", "dtype_policy", "run", "profile", "fallback_ops", "native_ops", "downcasts_64bit",
          "host_casts_64bit", "host_copies", "unsupported_features", "memory", "memory_timeline", "compilation",
          "error", "traceback", "script", "exit_status", "device_timeline"}

_COLORS = {"native": "#2b7bba", "fallback": "#e8743b", "copies": "#9b59b6"}
# Device event kinds on the estimated timeline (torch_neuron_sim.profiler).
_KIND_COLORS = {"kernel": "#2b7bba", "graph": "#1a7f37", "fallback": "#e8743b", "copy_h2d": "#9b59b6",
                "copy_d2h": "#b07cc6", "copy_d2d": "#6c3483", "compile": "#8c959f", "collective": "#d4a72c"}




def _size(n: float) -> str:
    return size(n, decimals=2)


def _fallback_section(data, add) -> None:
    fb = data.get("fallback_ops", [])
    if not fb:
        add("Ops that fall back to CPU", "<p class='ok' id='no-fallback'>No op fell back to the CPU: every op "
            "ran natively on the NeuronCore.</p>", anchor="fallbacks")
        return
    rows = []
    for f in fb:
        sites = f.get("sites") or [{"site": "", "count": f["count"]}]
        for s in sites:
            rows.append({"op": f["op"], "source line": short_site(s["site"]), "calls from line": s["count"],
                         "calls of op": f["count"],
                         **({"bytes copied (op)": f["bytes_copied"]} if "bytes_copied" in f else {})})
    calls = sum(f["count"] for f in fb)
    intro = (f"<p>{len(fb)} op(s) left the device in {calls} call(s): each copies its inputs to the host, runs "
             "the CPU kernel and copies the results back. One row per op and source line that issued it; "
             "click a header to sort.</p>")
    add("Ops that fall back to CPU", intro + _cut_note(len(rows)), _table(rows, "fallback_table"), "fallbacks")


def _memory_section(data, add) -> None:
    timeline = data.get("memory_timeline") or []
    peaks = {m["device"]: m for m in data.get("memory", [])}
    if not timeline:
        add("HBM in use over time", "<p>No device memory was allocated while the report was active.</p>")
        return
    from bokeh.models import HoverTool
    from bokeh.plotting import figure

    p = figure(height=320, sizing_mode="stretch_width", x_axis_label="seconds since the report started",
               y_axis_label="MiB", tools="pan,box_zoom,wheel_zoom,reset,save")
    palette = ["#2b7bba", "#e8743b", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
    notes = []
    for i, t in enumerate(timeline):
        seconds = np.asarray(t["seconds"], dtype=np.float64)
        color = palette[i % len(palette)]
        # Reserved (the caching allocator's segments, what must fit) dashed
        # behind allocated (live blocks): the gap is the cache.
        if t.get("reserved_bytes"):
            p.step(seconds, np.asarray(t["reserved_bytes"], dtype=np.float64) / 2**20, mode="after", line_width=1.5,
                   line_dash="dashed", color=color, alpha=0.6, legend_label=f"{t['device']} reserved")
        p.step(seconds, np.asarray(t["bytes"], dtype=np.float64) / 2**20, mode="after", line_width=2, color=color,
               legend_label=f"{t['device']} allocated")
        m = peaks.get(t["device"])
        if m:
            notes.append(f"{t['device']}: peak {_size(m['peak_bytes'])} allocated, {_size(m['peak_reserved_bytes'])} "
                         f"reserved of {_size(m['capacity_bytes'])} ({100 * m['fraction']:.2f}%)")
        if t.get("downsampled"):
            notes.append(f"{t['device']}: {t['events']} allocations and frees, drawn as {len(t['seconds'])} points "
                         "(each run of events keeps its lowest and highest value)")
    p.add_tools(HoverTool(tooltips=[("t", "@x{0.000} s"), ("MiB", "@y{0.00}")]))
    p.legend.location = "top_left"
    intro = ("<p>Bytes on each device, from the allocator's memory history: allocated (solid; live tensors' "
             "blocks in their size classes) and reserved (dashed; the caching allocator's segments, free blocks "
             "included: what must fit in HBM). " + "; ".join(html.escape(n) for n in notes) + ".</p>")
    add("HBM in use over time", intro, p, "hbm")


def _time_section(data, add) -> None:
    ops = [("native", n["op"], n.get("seconds", 0.0), 0.0) for n in data.get("native_ops", [])]
    ops += [("fallback", f["op"], f.get("seconds", 0.0), f.get("copy_seconds", 0.0)) for f in data.get("fallback_ops", [])]
    copies = data.get("host_copies", {})
    if not any(s for _, _, s, _ in ops) and not copies.get("seconds"):
        add("Time by op", "<p>No op ran on neuron while the report was active.</p>",
            anchor="time")
        return
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure

    rows: dict[str, list[float]] = {}  # op -> [native, fallback host kernel, copies]
    for kind, op, seconds, copy_seconds in ops:
        r = rows.setdefault(op, [0.0, 0.0, 0.0])
        if kind == "native":
            r[0] += seconds
        else:
            r[1] += max(seconds - copy_seconds, 0.0)
            r[2] += copy_seconds
    if copies.get("seconds"):
        rows["host copies (.cpu(), .to(), .item())"] = [0.0, 0.0, copies["seconds"]]
    ranked = sorted(rows.items(), key=lambda kv: -sum(kv[1]))
    shown, rest = ranked[:TIME_OPS], ranked[TIME_OPS:]
    if rest:
        shown.append((f"{len(rest)} other op(s)", [sum(r[1][i] for r in rest) for i in range(3)]))
    names = [n for n, _ in reversed(shown)]
    ms = {k: [v[i] * 1e3 for _, v in reversed(shown)] for i, k in enumerate(("native", "fallback", "copies"))}
    src = ColumnDataSource(dict(op=names, **ms))
    p = figure(y_range=names, height=max(160, 22 * len(names) + 80), sizing_mode="stretch_width",
               x_axis_label="milliseconds (this machine's wall time)", tools="xpan,xwheel_zoom,reset,save")
    labels = {"native": "native (on device)", "fallback": "fallback: host kernel", "copies": "host <-> device copies"}
    p.hbar_stack(["native", "fallback", "copies"], y="op", height=0.7, source=src,
                 color=[_COLORS[k] for k in ("native", "fallback", "copies")],
                 legend_label=[labels[k] for k in ("native", "fallback", "copies")])
    p.add_tools(HoverTool(tooltips=[("op", "@op"), ("native", "@native{0.000} ms"),
                                    ("fallback", "@fallback{0.000} ms"), ("copies", "@copies{0.000} ms")]))
    p.legend.location = "bottom_right"
    p.y_range.range_padding = 0.02
    total = sum(sum(v) for v in rows.values())
    intro = (f"<p>Wall time inside each op on this machine, {total * 1e3:.1f} ms in all: native ops run the CPU "
             "kernel on device memory, a fallback adds its host round trip. It ranks the ops; it is not a "
             "Trainium timing. The slowest {n} shown.</p>").replace("{n}", str(min(TIME_OPS, len(rows))))
    add("Time by op", intro, p, "time")


def _native_section(data, add) -> None:
    nat = data.get("native_ops", [])
    rows = [{"op": n["op"], "calls": n["count"], **({"ms": round(n["seconds"] * 1e3, 3)} if "seconds" in n else {})}
            for n in nat]
    intro = f"<p>{len(nat)} op(s), {sum(n['count'] for n in nat)} call(s) ran on the NeuronCore.</p>"
    add("Native ops", intro + _cut_note(len(rows)), _table(rows, "native_table") if rows else None, "native")


def _downcast_section(data, add) -> None:
    dc = data.get("downcasts_64bit", [])
    rows = [{"op": c["op"], "float64 -> float32": c["float64"], "int64 -> int32": c["int64"]} for c in dc]
    intro = (f"<p>{len(dc)} native op(s) computed 64-bit values in 32 bits (Trainium has no 64-bit arithmetic); "
             f"casts to or from 64-bit types done on the host: {data.get('host_casts_64bit', 0)}.</p>")
    add("64-bit values computed in 32 bits", intro, _table(rows, "downcast_table") if rows else None, "downcasts")


def _unsupported_section(data, add) -> None:
    un = data.get("unsupported_features", [])
    if not un:
        add("Unsupported features hit", "<p class='ok'>None.</p>", anchor="unsupported")
        return
    add("Unsupported features hit", "<p>Features Trainium does not support, counted even where the program "
        "caught the error.</p>", _table([{"feature": u["feature"], "times": u["count"]} for u in un],
                                         "unsupported_table"), "unsupported")


def _compilation_section(data, add) -> None:
    c = data.get("compilation")
    if not c:
        return
    many = c.get("ops_with_many_shapes", [])
    intro = (f"<p>{c['distinct_signatures']} distinct op signatures (one NEFF compilation each on the device), "
             f"{c['cache_hits']} cache hits. Ops with at least {c['many_shapes_threshold']} signatures "
             f"(a dynamic-shape risk under torch.compile): {len(many)}.</p>")
    rows = [{"op": m["op"], "signatures": m["signatures"]} for m in many]
    add("Eager compilations", intro, _table(rows, "many_shapes_table") if rows else None, "compilations")


def _device_timeline_section(data, add) -> None:
    t = data.get("device_timeline")
    if not t:
        return
    if not t.get("events_total"):
        add("Estimated device timeline", "<p id='no-device-events'>No device event was recorded: the program ran "
            "nothing on a neuron device.</p>", anchor="device-timeline")
        return
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure
    from bokeh.transform import factor_cmap

    ev = t["events"]
    if len(ev) > CHART_EVENTS:  # the longest: they are what a reader looks for
        ev = sorted(ev, key=lambda e: -e["dur_ms"])[:CHART_EVENTS]
    lanes = sorted({e["lane"] for e in ev}, reverse=True)
    start = np.array([e["start_ms"] for e in ev], dtype=np.float64)
    dur = np.array([e["dur_ms"] for e in ev], dtype=np.float64)
    src = ColumnDataSource(dict(
        lane=[e["lane"] for e in ev], left=start, right=start + dur, name=[e["name"] for e in ev],
        kind=[e["kind"] for e in ev], bound=[e["bound"] for e in ev], us=dur * 1e3))
    kinds = sorted({e["kind"] for e in ev})
    color = factor_cmap("kind", [_KIND_COLORS.get(k, "#57606a") for k in kinds], kinds)
    p = figure(y_range=lanes, height=max(180, 50 * len(lanes) + 100), sizing_mode="stretch_width",
               x_axis_label="milliseconds from the first device event (cost model: an estimate)",
               tools="xpan,xwheel_zoom,box_zoom,reset,save")
    p.hbar(y="lane", left="left", right="right", height=0.8, source=src, color=color, line_color=color,
           legend_field="kind")
    p.add_tools(HoverTool(tooltips=[("event", "@name"), ("kind", "@kind"), ("bound", "@bound"),
                                    ("modelled", "@us{0,0.0} us"), ("start", "@left{0.000} ms")]))
    p.legend.location = "top_right"
    p.legend.orientation = "horizontal"
    b = t["breakdown"]
    intro = (f"<p class='estimate'><b>ESTIMATE</b>, not a measurement: every device event costed by the cost model "
             f"(docs/profiling.md) for {html.escape(str(t['profile']))} at LNC={t['lnc']}. "
             f"{t['events_total']} device event(s); the busiest stream is busy {t['total_seconds'] * 1e3:.3f} ms: "
             + html.escape(", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in b.items() if v)) + ".")
    from ..profiler.estimate import adaptive_eager_line
    intro += " " + html.escape(adaptive_eager_line(t))
    if len(ev) < t["events_total"]:
        intro += f" The {len(ev)} longest events are drawn."
    if t.get("trace"):
        intro += f" The full trace (Perfetto, chrome://tracing): {html.escape(str(t['trace']))}."
    add("Estimated device timeline", intro + "</p>", p, "device-timeline")
    rows = [{"op": o["name"], "kind": o["kind"], "calls": o["count"], "total us": round(o["seconds"] * 1e6, 3),
             **{f"{k} us": round(o[k] * 1e6, 3) for k in t["breakdown"] if any(r[k] for r in t["ops"])},
             "bound": o["bound"]} for o in t["ops"]]
    add("Estimated device time by op", "<p class='estimate'>Modelled device time per op (ESTIMATE), split by what "
        "bounds it.</p>" + _cut_note(len(rows)), _table(rows, "device_time_table"), "device-time")


def _generic_section(key: str, value: Any, add) -> None:
    """A section the page does not know by name (e.g. added by a newer feature)."""
    title = key.replace("_", " ").capitalize()
    if _is_records(value):
        fields = _timeline_fields(value)
        if fields:
            chart, note = _timeline_chart(value, fields, key)
            add(title, note, chart, key)
        add(title + " (table)" if fields else title, _cut_note(len(value)), _table(_flat_rows(value), key + "_table"),
            key + "-table" if fields else key)
    elif isinstance(value, dict):
        scalars = {k: v for k, v in value.items() if not isinstance(v, (list, dict))}
        rows = [{"": k.replace("_", " "), "value": _cell(v)} for k, v in scalars.items()]
        add(title, "", _table(rows, key + "_values") if rows else None, key)
        for k, v in value.items():
            if isinstance(v, (list, dict)) and v:
                _generic_section(f"{key}_{k}", v, add)
    elif isinstance(value, list):
        add(title, "<p>" + html.escape(", ".join(_cell(v) for v in value[:TABLE_ROWS])) + "</p>", anchor=key)
    elif value is not None:
        add(title, f"<p>{html.escape(_cell(value))}</p>", anchor=key)


# ---- timeline (an estimated device timeline, or any start/duration records) -----

def _timeline_fields(rows: list[dict]) -> Optional[dict[str, str]]:
    """Which keys hold the start, the duration (or end), the label and the lane, if these are events."""
    keys = set().union(*(r.keys() for r in rows[:50]))
    def find(names: Iterable[str]) -> Optional[str]:
        for n in names:
            for k in sorted(keys):
                if k == n or k.startswith(n + "_"):
                    if all(isinstance(r.get(k), (int, float)) for r in rows[:50] if k in r):
                        return k
        return None
    start = find(("start", "ts", "begin", "t0"))
    dur, end = find(("dur", "duration")), find(("end", "t1"))
    if not start or not (dur or end):
        return None
    label = next((k for k in ("name", "op", "event", "kind", "label") if k in keys), None)
    lane = next((k for k in ("lane", "track", "stream", "row", "device", "queue", "engine") if k in keys), None)
    return {"start": start, "dur": dur, "end": end, "label": label, "lane": lane}


def _timeline_chart(rows: list[dict], f: dict, key: str):
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure

    def span(r):
        s = float(r.get(f["start"], 0))
        e = s + float(r.get(f["dur"], 0)) if f["dur"] else float(r.get(f["end"], s))
        return s, e
    events = [(r, *span(r)) for r in rows]
    shown = events
    if len(events) > CHART_EVENTS:  # keep the longest: they are what a reader looks for
        shown = sorted(events, key=lambda x: x[1] - x[2])[:CHART_EVENTS]
    lanes = sorted({str(r.get(f["lane"], "")) for r, _, _ in shown}) if f["lane"] else [key]
    unit = f["start"].split("_")[-1] if "_" in f["start"] else ""
    src = ColumnDataSource(dict(
        left=np.array([s for _, s, _ in shown], dtype=np.float64),
        right=np.array([e for _, _, e in shown], dtype=np.float64),
        lane=[str(r.get(f["lane"], "")) if f["lane"] else key for r, _, _ in shown],
        label=[str(r.get(f["label"], "")) if f["label"] else "" for r, _, _ in shown]))
    p = figure(y_range=lanes, height=max(160, 40 * len(lanes) + 90), sizing_mode="stretch_width",
               x_axis_label=f"time{' (' + unit + ')' if unit else ''}", tools="xpan,xwheel_zoom,box_zoom,reset,save")
    p.hbar(y="lane", left="left", right="right", height=0.8, source=src, color=_COLORS["native"],
           line_color="#1d4f7a")
    p.add_tools(HoverTool(tooltips=[("event", "@label"), ("start", "@left"), ("end", "@right")]))
    note = f"<p>{len(events)} event(s)"
    if len(shown) < len(events):
        note += f"; the {len(shown)} longest are drawn"
    return p, note + ".</p>"


# ---- tables -----------------------------------------------------------------

def _table(rows: list[dict], name: str) -> str:
    """A sortable HTML table of flat records (at most TABLE_ROWS): numbers
    right-aligned with thousands separators, sorted by value (data-v) on a
    click of their header (_SORT_JS)."""
    rows = rows[:TABLE_ROWS]
    keys: list[str] = []
    for r in rows:
        keys.extend(k for k in r if k not in keys)
    head, numeric = [], {}
    for k in keys:
        values = [r.get(k, "") for r in rows]
        numeric[k] = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        head.append(f"<th{' class=num' if numeric[k] else ''}>{html.escape(k)}</th>")
    body = []
    for r in rows:
        cells = []
        for k in keys:
            v = r.get(k, "")
            if numeric[k]:
                text = f"{v:,}" if isinstance(v, int) else f"{v:,.3f}"
                cells.append(f"<td class=num data-v='{v!r}'>{text}</td>")
            else:
                cells.append(f"<td>{html.escape(str(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f"<div class=table-wrap><table class=sortable id={html.escape(name, quote=True)}><thead><tr>{''.join(head)}"
            f"</tr></thead><tbody>\n" + "\n".join(body) + "\n</tbody></table></div>")


def _is_records(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(r, dict) for r in v)


def _flat_rows(rows: list[dict]) -> list[dict]:
    return [{k: (v if isinstance(v, (int, float, str)) else _cell(v)) for k, v in r.items()} for r in rows[:TABLE_ROWS]]


def _cell(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def _cut_note(n: int) -> str:
    return f"<p class='note'>Showing the first {TABLE_ROWS} of {n} rows (--json lists all).</p>" if n > TABLE_ROWS else ""


# ---- header and summary -----------------------------------------------------

