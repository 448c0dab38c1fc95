"""The migration report as one self-contained HTML page.

    python -m torch_neuron_sim report --html report.html train.py
    with torch_neuron_sim.report(html="report.html"): ...

render(data) turns the report's model (Report.data, the dict --json prints)
into a page a team can attach to a ticket: it opens offline, with Bokeh's
JavaScript inlined (Bokeh rather than Plotly: its core bundle is about 1.3
MB, Plotly's about 5 MB). Charts are Bokeh figures, all roots of one Bokeh
document; the header, the summary and the tables are plain HTML (a click on
a header sorts its table), so the browser paints them at once and draws the
charts once BokehJS has started (it runs after the first paint): a reader
sees the page's figures well before the charts. Bokeh's own tables (DataTable) would
cost its widget and table bundles (0.7 MB more to parse) and a view per
table before anything showed.

Sections the page does not know by name (added to the model by other
features) are still shown: a list of records becomes a sortable table, a
list of records with a start and a duration (or end) becomes a timeline
chart, a dict becomes a table of its values and tables of its lists.
Everything large is bounded: tables show at most TABLE_ROWS rows, timelines
draw at most CHART_EVENTS events (the longest), so a run of 100k ops still
makes a page of a few MB (benchmarks/bench_report_page.py measures its size,
how long a browser takes to show its first content and to draw every chart).
"""
from __future__ import annotations

import html
import os
from typing import Any

from .page_sections import (  # noqa: F401  (the page's limits are read as page.TIMELINE_EVENTS and so on)
    _KNOWN, CHART_EVENTS, TABLE_ROWS, TIME_OPS, TIMELINE_EVENTS, _compilation_section, _device_timeline_section,
    _downcast_section, _fallback_section, _generic_section, _memory_section, _native_section, _size, _time_section,
    _unsupported_section,
)

def render(data: dict[str, Any]) -> str:
    """The page for a report model (Report.data)."""
    charts, blocks = [], []

    def add(title: str, intro: str = "", content: Any = None, anchor: str = "") -> None:
        """A section: its intro, then a table (HTML) or a chart (a Bokeh figure)."""
        block = {"title": title, "intro": intro, "anchor": anchor or _anchor(title), "html": "", "chart": None}
        if isinstance(content, str):
            block["html"] = content
        elif content is not None:
            block["chart"] = len(charts)
            charts.append(content)
        blocks.append(block)

    _fallback_section(data, add)
    _memory_section(data, add)
    _time_section(data, add)
    _native_section(data, add)
    _downcast_section(data, add)
    _unsupported_section(data, add)
    _compilation_section(data, add)
    _device_timeline_section(data, add)
    for key in sorted(k for k in data if k not in _KNOWN):
        _generic_section(key, data[key], add)

    script = data.get("script")
    title = f"Migration report: {os.path.basename(script)}" if script else "Migration report"
    bokeh_js, chart_script, divs = _charts(charts)
    body = []
    for b in blocks:
        body.append(f"<section id=\"{html.escape(b['anchor'])}\">\n<h2>{html.escape(b['title'])}</h2>\n{b['intro']}"
                    f"{b['html']}")
        if b["chart"] is not None:
            # The chart's height is kept free: drawing it does not move the page.
            body.append(f"<div class=\"chart\" style=\"min-height: {charts[b['chart']].height}px\">"
                        f"{divs[b['chart']]}</div>")
        body.append("</section>")
    nav = "".join(f"<a href=\"#{html.escape(b['anchor'])}\">{html.escape(b['title'])}</a>" for b in blocks)
    return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{html.escape(title)}</title>\n"
            f"<style>{_CSS}</style>\n</head>\n<body>\n{_header(data, title)}\n"
            f"<div class=\"cards\" id=\"summary\">{_summary(data)}</div>\n<nav>{nav}</nav>\n" + "\n".join(body) +
            f"\n{_FOOTER}\n<script>{_SORT_JS}</script>\n{bokeh_js}{chart_script}\n</body>\n</html>\n")

# The last text of the page, after every section: when the browser has painted
# it, the reader sees all the text and tables (its Element Timing entry,
# "page-text", is what benchmarks/bench_report_page.py reports).
_FOOTER = ("<p class=\"note\" id=\"footer\" elementtiming=\"page-text\">Written by <code>python -m torch_neuron_sim "
           "report --html</code>; <code>--json</code> writes the same report as JSON, with every row.</p>")

def _charts(charts: list) -> tuple[str, str, list[str]]:
    """BokehJS and the script that draws the charts (held as text, run by
    _START_CHARTS), and one placeholder per chart.

    Every chart is a root of one Bokeh document: one embed, one BokehJS start.
    Only BokehJS's core bundle is needed (the tables are HTML). It runs after
    the browser has painted the text and tables, not while the page parses:
    a parser-blocking script would hold the first paint until BokehJS had
    started, and a deferred one from a data: URL cost more to load (measured
    in Chromium: about a quarter more main-thread time to every chart drawn)."""
    if not charts:
        return "", "", []
    from bokeh.embed import components
    from bokeh.resources import Resources

    chart_js, divs = components(charts, wrap_script=False)
    bokeh_js = "\n".join(Resources(mode="inline", components=["bokeh"]).js_raw)
    return (f"<script type=\"text/plain\" id=\"bokehjs\">{bokeh_js}</script>\n"
            f"<script type=\"text/plain\" id=\"bokeh-charts\">{chart_js}</script>\n"), \
        f"<script>{_START_CHARTS}</script>", list(divs)

# After the next frame is painted, run BokehJS, then the script that draws the
# charts (in this order: Bokeh's script would give up on a BokehJS that takes
# over a second to start).
_START_CHARTS = """
requestAnimationFrame(() => setTimeout(() => {
  for (const id of ["bokehjs", "bokeh-charts"]) {
    const script = document.createElement("script");
    script.textContent = document.getElementById(id).textContent;
    document.body.append(script);
  }
}));
"""

def _header(data, title) -> str:
    run = data.get("run", {})
    failed = bool(data.get("error")) or data.get("exit_status") not in (None, 0)
    status = ("<span class='badge failed' id='status'>failed</span>" if failed
              else "<span class='badge passed' id='status'>ran to completion</span>")
    facts = [f"native-op table {data.get('native_op_table', '?')}", f"dtype policy {data.get('dtype_policy', '?')}"]
    if run:
        facts = [f"started {run.get('started', '?')}", f"{run.get('wall_seconds', 0):.2f} s"] + facts + [
            f"torch {run.get('torch', '?')}", f"torch_neuron_sim {run.get('torch_neuron_sim', '?')}"]
    out = f"<h1>{html.escape(title)} {status}</h1><p class='facts'>{html.escape(' · '.join(facts))}</p>"
    if failed:
        out += "<div class='error' id='error'><h2>The program failed</h2>"
        if data.get("exit_status") not in (None, 0):
            out += f"<p>Exit status {html.escape(str(data['exit_status']))}: {html.escape(str(data.get('error') or ''))}</p>"
        else:
            out += f"<p>{html.escape(str(data.get('error')))}</p>"
        if data.get("traceback"):
            out += f"<pre id='traceback'>{html.escape(data['traceback'])}</pre>"
        out += "<p>The report covers what ran until then.</p></div>"
    return out

def _summary(data) -> str:
    prof = data.get("profile", {})
    fb, nat = data.get("fallback_ops", []), data.get("native_ops", [])
    cards = []
    if prof:
        cards.append(("Device profile", prof.get("name", "?"),
                      f"{prof.get('devices', '?')} device(s), {_size(prof.get('hbm_per_device_bytes', 0))} HBM each"))
    for m in data.get("memory", []):
        cards.append((f"Peak HBM, {m['device']}", _size(m["peak_bytes"]),
                      f"allocated; {_size(m['peak_reserved_bytes'])} reserved of {_size(m['capacity_bytes'])} "
                      f"({100 * m['fraction']:.2f}%)"))
    if not data.get("memory"):
        cards.append(("Peak HBM", "0 B", "no device memory used"))
    cards.append(("Ops native / fallback", f"{len(nat)} / {len(fb)}",
                  f"{sum(n['count'] for n in nat)} / {sum(f['count'] for f in fb)} calls"))
    hc = data.get("host_copies")
    if hc is not None:
        fb_bytes = sum(f.get("bytes_copied", 0) for f in fb)
        cards.append(("Host copies", f"{hc.get('count', 0)}",
                      f"{_size(hc.get('bytes', 0))} outside fallbacks; fallbacks copied {_size(fb_bytes)}"))
    dc = data.get("downcasts_64bit", [])
    cards.append(("64-bit downcasts", f"{sum(c['float64'] + c['int64'] for c in dc)}",
                  f"in {len(dc)} op(s); {data.get('host_casts_64bit', 0)} casts on the host"))
    t = data.get("device_timeline")
    if t and t.get("events_total"):
        cards.append(("Estimated device time", f"{t['total_seconds'] * 1e3:.3f} ms",
                      f"busiest stream, {t['profile']} LNC={t['lnc']} (cost model)"
                      # first use of each op signature compiles: it dominates a short run's estimate
                      + (f"; {t['compile_seconds'] * 1e3:.0f} ms of it compiling new op signatures"
                         if t.get("compile_seconds") else "")))
    c = data.get("compilation", {})
    if c:
        cards.append(("Compilations", f"{c.get('distinct_signatures', 0)}", f"{c.get('cache_hits', 0)} cache hits"))
    un = data.get("unsupported_features", [])
    cards.append(("Unsupported features", f"{sum(u['count'] for u in un)}", f"{len(un)} feature(s)"))
    return "".join(f"<div class='card'><div class='label'>{html.escape(a)}</div><div class='value'>{html.escape(b)}"
                   f"</div><div class='detail'>{html.escape(d)}</div></div>" for a, b, d in cards)

def _anchor(title: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")

_CSS = """
html { overflow-y: scroll; }  /* a scrollbar appearing would resize every chart */
body { font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; margin: 0 auto;
       max-width: 1200px; padding: 16px 24px 48px; color: #1f2328; height: auto; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #d0d7de; }
.facts, .note { color: #57606a; font-size: 0.9em; }
.badge { font-size: 0.6em; padding: 2px 8px; border-radius: 10px; vertical-align: middle; color: white; }
.badge.passed { background: #1a7f37; } .badge.failed { background: #cf222e; }
.error { border: 1px solid #cf222e; background: #fff5f5; padding: 8px 16px; border-radius: 6px; }
.error h2 { border: none; margin-top: 0.4em; }
pre { overflow-x: auto; font-size: 0.85em; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; }
.card { border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 14px; min-width: 150px; }
.card .label { color: #57606a; font-size: 0.85em; } .card .value { font-size: 1.4em; font-weight: 600; }
.card .detail { color: #57606a; font-size: 0.8em; }
.ok { color: #1a7f37; font-weight: 600; }
nav a { margin-right: 12px; font-size: 0.9em; }
.table-wrap { max-height: 30em; overflow: auto; border: 1px solid #d0d7de; border-radius: 6px; }
table.sortable { border-collapse: collapse; width: 100%; font-size: 0.85em; }
table.sortable th { position: sticky; top: 0; background: #f6f8fa; cursor: pointer; text-align: left;
                    padding: 4px 8px; border-bottom: 1px solid #d0d7de; white-space: nowrap; user-select: none; }
table.sortable td { padding: 3px 8px; border-bottom: 1px solid #eaeef2; }
table.sortable .num { text-align: right; font-variant-numeric: tabular-nums; }
table.sortable th[aria-sort=ascending]::after { content: " \\25B2"; }
table.sortable th[aria-sort=descending]::after { content: " \\25BC"; }
.chart { margin-top: 8px; }
"""

# Click a header to sort its table by that column; a second click reverses.
_SORT_JS = """
document.addEventListener("click", (event) => {
  const th = event.target.closest("table.sortable th");
  if (!th) return;
  const column = th.cellIndex, body = th.closest("table").tBodies[0];
  const ascending = th.getAttribute("aria-sort") !== "ascending";
  for (const other of th.parentNode.cells) other.removeAttribute("aria-sort");
  th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  const key = (row) => {
    const cell = row.cells[column];
    return cell.dataset.v !== undefined ? Number(cell.dataset.v) : cell.textContent;
  };
  const sign = ascending ? 1 : -1;
  const rows = [...body.rows].sort((a, b) => { const x = key(a), y = key(b); return x < y ? -sign : x > y ? sign : 0; });
  body.append(...rows);
});
"""
