"""How big the report page gets and how fast it opens, for a small run and
for a huge one (100k native ops and 300 fallbacks: some 400k allocations
and frees in the memory history):

    python benchmarks/bench_report_page.py [--repeats N]

Per run: the page's size, the points drawn for HBM over time, and two times
in headless Chromium (Debian's, driven by Playwright, as the browser tests),
each the median of N loads after a warm-up:

* text and tables visible: when the browser painted the page's last text,
  its footer after every section (the footer's Element Timing entry, from
  navigation start): the header, the summary and every table are then on
  screen. The page paints them before BokehJS runs (report/page.py starts it
  after the first paint);
* every chart drawn: from navigation to Bokeh having built the view of every
  chart (measured here, around the browser).

Aims: a few MB, and open in under a second, for both times: the last
column says, for this run, whether the text and tables and whether every
chart met it (on a quiet machine both do, docs/benchmarks.md). Beside them,
in the same browser and run, a page holding one Bokeh chart shows the floor
of drawing any Bokeh chart here (parsing and starting BokehJS's 1.3 MB):
load on a shared machine raises it as much as the report's own time, so a
missed "every chart" with a high floor is the machine, not the page.
benchmarks/run_all.py puts the table in docs/benchmarks.md and the README.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from timing import Table, cli

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from browser import Page, bokeh_ready, chromium_path  # noqa: E402

GROUP = "report-page"
AIM_S = 1.0

RUNS = {
    "small (a few ops)": "import torch\nx = torch.ones(16, device='neuron')\nfor i in range(10):\n"
                         "    x = torch.cumprod(x + 1, 0)\n",
    "huge (100k ops)": textwrap.dedent("""\
        import torch
        x = torch.ones(16, device="neuron")
        for i in range(100_000):
            x = x + 1
        for i in range(300):
            torch.cumprod(x, 0)
        """),
}


def report_page(code: str, tmp: Path) -> tuple[Path, dict]:
    """The page and the JSON of `python -m torch_neuron_sim report` on `code`."""
    script, html, js = tmp / "run.py", tmp / "report.html", tmp / "report.json"
    script.write_text(code)
    r = subprocess.run([sys.executable, "-m", "torch_neuron_sim", "report", "--html", str(html), "--json",
                        "--output", str(js), str(script)], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"the report run failed ({r.returncode}):\n{r.stderr}")
    return html, json.loads(js.read_text())


def one_chart_page(tmp: Path) -> Path:
    from bokeh.embed import file_html
    from bokeh.plotting import figure
    from bokeh.resources import INLINE

    p = figure(height=300)
    p.line([0, 1, 2], [0, 1, 0])
    html = tmp / "one_chart.html"
    html.write_text(file_html(p, INLINE, "one chart"))
    return html


# Resolves to the paint time (ms from navigation start) of the page's footer.
TEXT_PAINTED = """() => new Promise(resolve => new PerformanceObserver(list => {
    const entry = list.getEntries().find(e => e.identifier === "page-text");
    if (entry) resolve(entry.renderTime);
}).observe({type: "element", buffered: true}))"""


def open_time(browser, html: Path, loads: int) -> tuple[float, float]:
    """Median seconds to the text and tables painted (None for a page without
    the report's footer) and to every Bokeh view built, after one warm-up
    load; a console error fails the benchmark (the page is broken)."""
    page = Page(browser)
    page.open(html)
    bokeh_ready(page.page)
    first, drawn = [], []
    for _ in range(loads):
        start = time.perf_counter()
        page.open(html)
        bokeh_ready(page.page)
        drawn.append(time.perf_counter() - start)
        if page.page.locator("#footer").count():
            first.append(page.page.evaluate(TEXT_PAINTED) / 1e3)
    page.close()
    if page.errors:
        raise RuntimeError(f"{html.name}: console errors {page.errors}")
    return (statistics.median(first) if first else None), statistics.median(drawn)


def run(repeats: int = 5) -> list[Table]:
    from playwright.sync_api import sync_playwright

    table = Table(GROUP, ["run", "page", "HBM points (of allocations and frees)",
                          f"text and tables visible (median of {repeats})", f"every chart drawn (median of {repeats})",
                          "a one-chart Bokeh page drawn", "aim: open in < 1 s"])
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox", "--disable-gpu"])
        try:
            _, floor = open_time(browser, one_chart_page(Path(tmp)), repeats)
            for name, code in RUNS.items():
                html, data = report_page(code, Path(tmp))
                points = sum(len(t["seconds"]) for t in data["memory_timeline"])
                events = sum(t["events"] for t in data["memory_timeline"])
                first, drawn = open_time(browser, html, repeats)
                table.add(name, f"{html.stat().st_size / 2**20:.2f} MiB", f"{points:,} (of {events:,})",
                          f"{first:.2f} s", f"{drawn:.2f} s", f"{floor:.2f} s",
                          f"text and tables {'ok' if first < AIM_S else 'missed'}; "
                          f"every chart {'ok' if drawn < AIM_S else 'missed'}")
        finally:
            browser.close()
    return [table]


def main() -> None:
    args = cli(5)
    run(args.repeats)


if __name__ == "__main__":
    main()
