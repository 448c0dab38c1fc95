"""How big the report page gets and how fast it opens, for a small run and
for a huge one (100k native ops, 200k allocations and frees, fallbacks):

    python benchmarks/bench_report_page.py

Prints, per run: the page's size, the points drawn for HBM over time, and
the time headless Chromium takes to open the page and draw every chart
(median of 5 loads after a warm-up). Aims: a few MB and under a second.
"""
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from browser import Page, bokeh_ready, chromium_path  # noqa: E402

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


def main() -> None:
    import json

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox", "--disable-gpu"])
        for name, code in RUNS.items():
            script, html, js = Path(tmp) / "run.py", Path(tmp) / "r.html", Path(tmp) / "r.json"
            script.write_text(code)
            subprocess.run([sys.executable, "-m", "torch_neuron_sim", "report", "--html", str(html), "--json",
                            "--output", str(js), str(script)], check=True, stdout=subprocess.DEVNULL)
            data = json.loads(js.read_text())
            points = sum(len(t["seconds"]) for t in data["memory_timeline"])
            events = sum(t["events"] for t in data["memory_timeline"])
            page = Page(browser)
            page.open(html)
            bokeh_ready(page.page)
            times = []
            for _ in range(5):
                start = time.perf_counter()
                page.open(html)
                bokeh_ready(page.page)
                times.append(time.perf_counter() - start)
            page.close()
            print(f"{name:<20} page {html.stat().st_size / 2**20:5.2f} MiB   HBM points {points:>5} "
                  f"(of {events} allocs/frees)   opened and drawn in {statistics.median(times):.2f} s"
                  f"{'   console errors: ' + str(page.errors) if page.errors else ''}")
        browser.close()


if __name__ == "__main__":
    main()
