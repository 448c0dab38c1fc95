"""The migration report as a page (`report --html`, `report(html=...)`),
checked in headless Chromium as a person would look at it: no console
errors, each chart drew its data (its data sources have rows, and its plot
frame, legends hidden, holds the data's colours), the page draws with the
network cut off, the summary cards and tables show the run's numbers, the
fallback table names the ops and the lines that issued them, tables sort, a
failing script still gets its page, and a huge run stays a small page."""
import importlib.util
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import torch_neuron_sim
from browser import Chart, Page, bokeh_ready, colored_pixels
from torch_neuron_sim.migration_report import page as report_html

ROOT = Path(__file__).resolve().parents[2]
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
    d = torch.ones(8, 8, device=dev, dtype=torch.float64)
    d = d @ d                                  # 64-bit values computed in 32 bits
    try:
        torch.eye(3).to_sparse().to(dev)       # an unsupported feature, caught
    except NotImplementedError:
        pass
    if len(sys.argv) > 1 and sys.argv[1] == "fail":
        torch.cummax(x, 0)
        raise ValueError("the script failed")
    """)
RAISE_LINE = next(i for i, text in enumerate(SCRIPT.splitlines(), 1) if "raise ValueError" in text)


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


def chart(page, anchor) -> Chart:
    """The chart of a section as drawn: its data sources' rows, its plot frame without legends."""
    return Chart(page, f"section#{anchor} .chart")


def drawn(page, anchor, rgb, at_least):
    """The chart of a section drew its data: every glyph has rows, and the plot
    frame (legends hidden) holds at least `at_least` pixels of the colour."""
    c = chart(page, anchor)
    assert c.rows and min(c.rows) > 0, f"{anchor}: a glyph without data, rows {c.rows}"
    n = c.pixels(rgb)
    assert n > at_least, f"{anchor}: {n} pixels of {rgb} in the plot frame"
    return True


def cards(page):
    """The summary cards: label -> (value, detail)."""
    return {c[0]: (c[1], c[2]) for c in page.locator("#summary .card").evaluate_all(
        "cs => cs.map(c => [...c.children].map(e => e.textContent.trim()))")}


def table_rows(page, anchor):
    """The rows of the table in a section, as texts of cells, in the order shown."""
    return page.locator(f"section#{anchor} table tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent.trim()))")


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    """The page and the JSON of one report of SCRIPT (made once for the file's tests)."""
    tmp = tmp_path_factory.mktemp("known")
    html, js = tmp / "report.html", tmp / "report.json"
    r = run_report(tmp, "--json", "--output", str(js), "--html", str(html))
    assert r.returncode == 0, r.stderr
    return html, json.loads(js.read_text())


def test_page_of_a_known_script(tmp_path, chromium, known):
    html, data = known
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
    # The summary cards show this run's numbers (from the JSON, formatted here).
    card = cards(page)
    prof = data["profile"]
    assert card["Device profile"] == ("trn2", f"{prof['devices']} device(s), 24.00 GiB HBM each")
    (mem,) = data["memory"]
    assert 2 * 2**20 <= mem["peak_bytes"] < 2**30
    assert mem["peak_reserved_bytes"] >= mem["peak_bytes"]
    assert card["Peak HBM, neuron:0"] == (
        f"{mem['peak_bytes'] / 2**20:.2f} MiB",
        f"allocated; {mem['peak_reserved_bytes'] / 2**20:.2f} MiB reserved of 24.00 GiB "
        f"({100 * mem['peak_reserved_bytes'] / 24 / 2**30:.2f}%)")
    nat, fb = data["native_ops"], data["fallback_ops"]
    assert card["Ops native / fallback"] == (f"{len(nat)} / 2", f"{sum(n['count'] for n in nat)} / 4 calls")
    hc, fb_bytes = data["host_copies"], sum(f["bytes_copied"] for f in fb)
    assert 2**10 <= fb_bytes < 2**20 and hc["bytes"] < 2**10
    assert card["Host copies"] == (str(hc["count"]), f"{hc['bytes']} B outside fallbacks; "
                                                     f"fallbacks copied {fb_bytes / 2**10:.2f} KiB")
    # d @ d in float64 ran in float32 (and the float64 factory made its values in 32 bits).
    dc = {c["op"]: c for c in data["downcasts_64bit"]}
    assert dc["aten::mm"]["float64"] >= 1
    assert card["64-bit downcasts"] == (str(sum(c["float64"] + c["int64"] for c in dc.values())),
                                        f"in {len(dc)} op(s); {data['host_casts_64bit']} casts on the host")
    assert ["aten::mm", str(dc["aten::mm"]["float64"]), "0"] in table_rows(page, "downcasts")
    c = data["compilation"]
    assert c["distinct_signatures"] > 0
    assert card["Compilations"] == (str(c["distinct_signatures"]), f"{c['cache_hits']} cache hits")
    # The sparse tensor the script made (and caught the error of).
    assert data["unsupported_features"] == [{"feature": "sparse tensors", "count": 1}]
    assert card["Unsupported features"] == ("1", "1 feature(s)")
    assert table_rows(page, "unsupported") == [["sparse tensors", "1"]]
    # Fallback table: each op with the line that issued it and the bytes it copied.
    head = page.locator("section#fallbacks th").all_inner_texts()
    assert head[:5] == ["op", "source line", "calls from line", "calls of op", "bytes copied (op)"]
    rows = table_rows(page, "fallbacks")
    assert [tuple(r[:5]) for r in rows] == [("aten::cumprod", "train.py:6", "3", "3", f"{fb[0]['bytes_copied']:,}"),
                                            ("aten::median", "train.py:7", "1", "1", f"{fb[1]['bytes_copied']:,}")]
    # Sorting: a click on "calls from line" sorts ascending, a second click descending.
    header = page.locator("section#fallbacks th", has_text="calls from line")
    header.click()
    assert [r[0] for r in table_rows(page, "fallbacks")] == ["aten::median", "aten::cumprod"]
    header.click()
    assert [r[0] for r in table_rows(page, "fallbacks")] == ["aten::cumprod", "aten::median"]
    # Charts drew their data: the HBM line and the time bars (native in blue,
    # fallbacks in orange) are in the plot frames, legends hidden.
    assert drawn(page, "hbm", BLUE, 100)
    assert drawn(page, "time", BLUE, 1000) and drawn(page, "time", ORANGE, 500)
    # The estimated device timeline: labelled an estimate, its kernels drawn on
    # their lane, its per-op table names the matmul (also in the JSON).
    assert "ESTIMATE" in page.locator("section#device-timeline").inner_text()
    assert drawn(page, "device-timeline", BLUE, 100)
    ops = {r[0]: r for r in table_rows(page, "device-time")}
    assert "aten::mm" in ops and "aten::median" in ops
    assert data["device_timeline"]["ops"][0]["seconds"] > 0
    assert {e["lane"] for e in data["device_timeline"]["events"]} == {"neuron:0 stream 0"}
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    assert (tmp_path / "report.png").stat().st_size > 10_000
    assert p.errors == []
    p.close()


def test_page_draws_with_the_network_cut_off(chromium, known, tmp_path):
    """Opened where there is no network: nothing is requested but the file
    itself, and every chart still draws its data."""
    html, _ = known
    p = Page(chromium, offline=True).open(html)
    bokeh_ready(p.page)
    assert p.left_the_file == []
    charts = p.page.locator("section:has(.chart)").evaluate_all("ss => ss.map(s => s.id)")
    assert charts == ["hbm", "time", "device-timeline"]
    for anchor in charts:
        assert drawn(p.page, anchor, BLUE, 100)
    assert p.errors == []
    p.close()
    # The cut is real: a page that asks for anything beyond its file is caught.
    fetches = tmp_path / "fetches.html"
    fetches.write_text("<!DOCTYPE html><title>x</title><img src='https://cdn.example.com/x.png'>")
    p = Page(chromium, offline=True).open(fetches)
    assert p.left_the_file == ["https://cdn.example.com/x.png"]
    p.close()


def test_chart_check_fails_on_an_empty_chart(chromium, known):
    """What the chart checks look at goes to nothing when a chart's data is
    emptied, legends and axes still drawn (a check of the checks)."""
    html, _ = known
    p = open_report(chromium, html)
    p.page.evaluate("""async () => {
      for (const m of Bokeh.documents[0].all_models)
        if (m.type === "ColumnDataSource") m.data = Object.fromEntries(Object.keys(m.data).map(k => [k, []]));
      await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
    }""")
    for anchor in ("hbm", "time", "device-timeline"):
        c = chart(p.page, anchor)
        assert c.rows and max(c.rows) == 0, (anchor, c.rows)
        assert c.pixels(BLUE) == 0 and c.pixels(ORANGE) == 0, anchor
        with pytest.raises(AssertionError, match="without data"):
            drawn(p.page, anchor, BLUE, 20)
    p.close()


def test_long_tables_say_they_are_cut(chromium, known, tmp_path, monkeypatch):
    html, data = known
    from torch_neuron_sim.migration_report import page_sections
    monkeypatch.setattr(page_sections, "TABLE_ROWS", 1)  # the sections cut their tables
    path = tmp_path / "cut.html"
    path.write_text(report_html.render(data))
    p = Page(chromium).open(path)
    page = p.page
    assert len(table_rows(page, "fallbacks")) == 1
    assert page.locator("section#fallbacks .note").all_inner_texts() == [
        "Showing the first 1 of 2 rows (--json lists all)."]
    assert len(table_rows(page, "native")) == 1
    assert page.locator("section#native .note").all_inner_texts() == [
        f"Showing the first 1 of {len(data['native_ops'])} rows (--json lists all)."]
    p.close()


def test_failing_script_still_gets_its_page(tmp_path, chromium):
    html = tmp_path / "report.html"
    r = run_report(tmp_path, "--html", str(html), script_args=("fail",))
    assert r.returncode == 1
    p = open_report(chromium, html)
    page = p.page
    assert page.locator("#status").inner_text() == "failed"
    tb = page.locator("#traceback").inner_text()
    assert f'train.py", line {RAISE_LINE}' in tb and tb.rstrip().endswith("ValueError: the script failed")
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
    assert drawn(p.page, "time", BLUE, 50)
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
    assert drawn(page, "engine_timeline", BLUE, 200)
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
    # The peaks survive downsampling, and the series and the cards count the
    # same bytes: allocated in size classes, reserved in segments.
    assert max(timeline["bytes"]) == data["memory"][0]["peak_bytes"]
    assert max(timeline["reserved_bytes"]) == data["memory"][0]["peak_reserved_bytes"]
    assert html.stat().st_size < 3 * 2**20
    p = open_report(chromium, html)
    assert drawn(p.page, "hbm", BLUE, 100)
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
    assert drawn(page, "hbm", BLUE, 100)
    assert drawn(page, "time", BLUE, 100)
    page.screenshot(path=str(tmp_path / "demo.png"), full_page=True)
    assert p.errors == []
    p.close()


def test_readme_shows_the_screenshot_and_the_command_that_makes_it():
    """The README's report command is the one scripts/report_screenshot.py runs
    (`make screenshot`), and the picture it made is there."""
    spec = importlib.util.spec_from_file_location("report_screenshot", ROOT / "scripts" / "report_screenshot.py")
    shot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shot)
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## The migration report as a page\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```\n", 2)[1]
    assert block.strip() == "python " + " ".join(shot.COMMAND)
    assert "](docs/images/report.png)" in section
    png = (ROOT / "docs" / "images" / "report.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert 50_000 < len(png) < 3 * 2**20, len(png)
    from PIL import Image

    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.size == (1200, 1500)  # the script's viewport
    assert colored_pixels(png, BLUE) > 1000  # it shows drawn charts, not a blank page
