"""The migration report as a page (`report --html`, `report(html=...)`),
checked in headless Chromium as a person would look at it: no console
errors, each chart drew its data, the fallback table names the ops and the
lines that issued them, tables sort, a failing script still gets its page,
and a huge run stays a small page."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import torch_neuron_sim
from browser import Page, bokeh_ready, colored_pixels
from torch_neuron_sim import report_html

ROOT = Path(__file__).resolve().parent.parent
BLUE, ORANGE = (0x2B, 0x7B, 0xBA), (0xE8, 0x74, 0x3B)  # the page's native and fallback colours

SCRIPT = textwrap.dedent("""\
    import sys
    import torch
    dev = torch.accelerator.current_accelerator()
    x = torch.ones(64, 64, device=dev)
    for _ in range(3):
        y = torch.cumprod(x, dim=0)
    m = x.median()
    keep = [torch.ones(256, 256, device=dev) * i for i in range(8)]
    del keep
    z = (x @ x).sum().item()
    if len(sys.argv) > 1 and sys.argv[1] == "fail":
        torch.cummax(x, 0)
        raise ValueError("the script failed")
    """)


@pytest.fixture(autouse=True)
def default_native_ops():
    torch_neuron_sim.native_ops.load()


def run_report(tmp_path, *opts, script=SCRIPT, script_args=(), name="train.py", timeout=600):
    path = tmp_path / name
    path.write_text(script)
    return subprocess.run([sys.executable, "-m", "torch_neuron_sim", "report", *opts, str(path), *script_args],
                          capture_output=True, text=True, timeout=timeout, cwd=tmp_path,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))


def open_report(chromium, path):
    p = Page(chromium).open(path)
    bokeh_ready(p.page)
    return p


def chart_png(page, anchor):
    return page.locator(f"section#{anchor} .chart").screenshot()


def table_rows(page, anchor):
    """The rows of the table in a section, as texts of cells, in the order shown."""
    return page.locator(f"section#{anchor} table tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent.trim()))")


def test_page_of_a_known_script(tmp_path, chromium):
    html, js = tmp_path / "report.html", tmp_path / "report.json"
    r = run_report(tmp_path, "--json", "--output", str(js), "--html", str(html))
    assert r.returncode == 0, r.stderr
    data = json.loads(js.read_text())
    # The same model fed both: the JSON's fallbacks are the page's rows.
    assert [f["op"] for f in data["fallback_ops"]] == ["aten::cumprod", "aten::median"]
    # Measured while the report ran: a fallback's bytes to the host and back, and
    # the copies outside fallbacks (.item()).
    assert data["fallback_ops"][0]["bytes_copied"] >= 3 * 2 * 64 * 64 * 4  # in and out, three calls
    assert data["fallback_ops"][0]["seconds"] >= data["fallback_ops"][0]["copy_seconds"] > 0
    assert data["host_copies"]["count"] >= 1
    assert any(n["seconds"] > 0 for n in data["native_ops"])
    (timeline,) = data["memory_timeline"]
    assert max(timeline["bytes"]) >= 8 * 256 * 256 * 4  # the eight live blocks at once
    size = html.stat().st_size
    assert size < 3 * 2**20, size
    assert "https://" not in html.read_text().split("<body>")[0]  # nothing fetched: scripts are inline

    p = open_report(chromium, html)
    page = p.page
    assert page.title() == "Migration report: train.py"
    assert page.locator("#status").inner_text() == "ran to completion"
    assert "trn2" in page.locator("#summary").inner_text()
    # Fallback table: each op with the line that issued it and its bytes.
    rows = table_rows(page, "fallbacks")
    assert [(r[0], r[1], r[2]) for r in rows] == [("aten::cumprod", "train.py:6", "3"),
                                                  ("aten::median", "train.py:7", "1")]
    # Sorting: a click on "calls from line" sorts ascending, a second click descending.
    header = page.locator("section#fallbacks th", has_text="calls from line")
    header.click()
    assert [r[0] for r in table_rows(page, "fallbacks")] == ["aten::median", "aten::cumprod"]
    header.click()
    assert [r[0] for r in table_rows(page, "fallbacks")] == ["aten::cumprod", "aten::median"]
    # Charts drew their data: the HBM line and the time bars (native in blue,
    # fallbacks in orange) are on the canvas.
    assert colored_pixels(chart_png(page, "hbm"), BLUE) > 100
    time_png = chart_png(page, "time")
    assert colored_pixels(time_png, BLUE) > 100 and colored_pixels(time_png, ORANGE) > 20
    # The estimated device timeline: labelled an estimate, its kernels drawn on
    # their lane, its per-op table names the matmul (also in the JSON).
    assert "ESTIMATE" in page.locator("section#device-timeline").inner_text()
    assert colored_pixels(chart_png(page, "device-timeline"), BLUE) > 20
    ops = {r[0]: r for r in table_rows(page, "device-time")}
    assert "aten::mm" in ops and "aten::median" in ops
    assert data["device_timeline"]["ops"][0]["seconds"] > 0
    assert {e["lane"] for e in data["device_timeline"]["events"]} == {"neuron:0 stream 0"}
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    assert (tmp_path / "report.png").stat().st_size > 10_000
    assert p.errors == []
    p.close()


def test_failing_script_still_gets_its_page(tmp_path, chromium):
    html = tmp_path / "report.html"
    r = run_report(tmp_path, "--html", str(html), script_args=("fail",))
    assert r.returncode == 1
    p = open_report(chromium, html)
    page = p.page
    assert page.locator("#status").inner_text() == "failed"
    tb = page.locator("#traceback").inner_text()
    assert 'train.py", line 13' in tb and tb.rstrip().endswith("ValueError: the script failed")
    assert "runpy" not in tb
    ops = [r[0] for r in table_rows(page, "fallbacks")]
    assert "aten::_cummax_helper" in ops  # what ran before the failure is reported
    assert p.errors == []
    p.close()


def test_no_fallback_page_says_so_and_context_manager_writes_it(tmp_path, chromium):
    html = tmp_path / "clean.html"
    x = torch.ones(32, 32, device="neuron")
    with torch_neuron_sim.report(html=str(html)) as r:
        (x @ x + 1).relu()
    assert r.fallback_ops == []
    p = open_report(chromium, html)
    assert "No op fell back to the CPU" in p.page.locator("#no-fallback").inner_text()
    assert p.page.locator("section#fallbacks tr").count() == 0
    assert colored_pixels(chart_png(p.page, "time"), BLUE) > 50
    assert p.errors == []
    p.close()
    # A block that raises writes its page too, marked failed.
    with pytest.raises(RuntimeError):
        with torch_neuron_sim.report(html=str(html)):
            raise RuntimeError("boom")
    text = html.read_text()
    assert "RuntimeError: boom" in text and "id='traceback'" in text


def test_sections_added_by_other_features_are_rendered(tmp_path, chromium):
    """Sections the page does not know by name (compiled graphs, collectives,
    a timeline of some engine) become sortable tables and a timeline chart."""
    x = torch.ones(8, device="neuron")
    with torch_neuron_sim.report() as r:
        torch.cumsum(x, 0)
    data = dict(r.data)
    data["compiled_graphs"] = [{"graph": f"g{i}", "nodes": 10 * i + 3, "recompile_reason": "shape"} for i in range(4)]
    data["collectives"] = {"total_bytes": 4096, "calls": [{"op": "all_reduce", "site": "t.py:3", "bytes": 4096}]}
    data["engine_timeline"] = [{"name": f"op{i}", "stream": f"neuron:0 stream {i % 2}", "start_us": 10.0 * i,
                                "dur_us": 8.0} for i in range(40)]
    path = tmp_path / "extra.html"
    path.write_text(report_html.render(data))
    p = open_report(chromium, path)
    page = p.page
    assert table_rows(page, "compiled_graphs")[3] == ["g3", "33", "shape"]
    page.locator("section#compiled_graphs th", has_text="nodes").click(click_count=2)
    assert table_rows(page, "compiled_graphs")[0][0] == "g3"
    assert table_rows(page, "collectives_calls") == [["all_reduce", "t.py:3", "4,096"]]
    assert colored_pixels(chart_png(page, "engine_timeline"), BLUE) > 200
    assert len(table_rows(page, "engine_timeline-table")) >= 10
    assert p.errors == []
    p.close()


HUGE = textwrap.dedent("""\
    import torch
    x = torch.ones(16, device="neuron")
    for i in range(100_000):
        x = x + 1          # 100k native ops, 100k allocations and frees
    for i in range(300):
        torch.cumprod(x, 0)  # and fallbacks
    """)


def test_huge_run_is_downsampled(tmp_path, chromium):
    html, js = tmp_path / "huge.html", tmp_path / "huge.json"
    r = run_report(tmp_path, "--json", "--output", str(js), "--html", str(html), script=HUGE, name="huge.py",
                   timeout=600)
    assert r.returncode == 0, r.stderr
    data = json.loads(js.read_text())
    assert sum(n["count"] for n in data["native_ops"]) >= 100_000
    assert data["fallback_ops"][0]["count"] == 300
    (timeline,) = data["memory_timeline"]
    assert timeline["events"] >= 200_000 and timeline["downsampled"]
    device = data["device_timeline"]
    assert device["events_total"] >= 100_300 and len(device["events"]) == report_html.TIMELINE_EVENTS
    assert len(timeline["seconds"]) <= 2000
    assert max(timeline["bytes"]) == data["memory"][0]["peak_bytes"]  # the peak survives downsampling
    assert html.stat().st_size < 3 * 2**20
    p = open_report(chromium, html)
    assert colored_pixels(chart_png(p.page, "hbm"), BLUE) > 100
    assert p.errors == []
    p.close()


def test_page_of_the_demo(tmp_path, chromium):
    """What `make demo` runs, as a page: sampling's fallback with its line."""
    example = ROOT / "examples" / "transformer_lm.py"
    line = next(i for i, text in enumerate(example.read_text().splitlines(), 1) if "torch.multinomial(" in text)
    html = tmp_path / "demo.html"
    r = subprocess.run([sys.executable, "-m", "torch_neuron_sim", "report", "--html", str(html), str(example),
                        "--steps", "1", "--generate", "3"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    p = open_report(chromium, html)
    page = p.page
    assert table_rows(page, "fallbacks") [0][:3] == ["aten::multinomial", f"examples/transformer_lm.py:{line}", "3"]
    assert len(table_rows(page, "native")) >= 10
    assert colored_pixels(chart_png(page, "hbm"), BLUE) > 100
    assert colored_pixels(chart_png(page, "time"), BLUE) > 100
    page.screenshot(path=str(tmp_path / "demo.png"), full_page=True)
    assert p.errors == []
    p.close()
