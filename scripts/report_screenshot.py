"""Makes the README's picture of the report page (`make screenshot`):

    python -m torch_neuron_sim report --html report.html examples/transformer_lm.py --steps 2 --generate 8

then opens the page in headless Chromium (Debian's, driven by Playwright, as
the tests do), writes docs/images/report.png and prints the page's size and
how long it took to open (load event, then every chart drawn)."""
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from browser import Page, bokeh_ready, chromium_path  # noqa: E402

COMMAND = ["-m", "torch_neuron_sim", "report", "--html", "report.html", "examples/transformer_lm.py",
           "--steps", "2", "--generate", "8"]


def main() -> None:
    from playwright.sync_api import sync_playwright

    out = ROOT / "docs" / "images" / "report.png"
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "report.html"
        cmd = [sys.executable] + [str(html) if a == "report.html" else a for a in COMMAND]
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox", "--disable-gpu"])
            page = Page(browser, width=1200, height=1500)
            page.open(html)  # once to warm the browser's caches, then measured
            bokeh_ready(page.page)
            start = time.perf_counter()
            page.open(html)
            bokeh_ready(page.page)
            seconds = time.perf_counter() - start
            page.page.screenshot(path=str(out))
            if page.errors:
                raise SystemExit(f"console errors: {page.errors}")
            browser.close()
        print(f"python {' '.join(COMMAND)}")
        print(f"page: {html.stat().st_size / 2**20:.2f} MiB, opened and drawn in {seconds:.2f} s; wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
