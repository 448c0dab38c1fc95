"""Headless Chromium for the tests that look at pages as a person would:
Debian's `chromium` (installed by `make test`, see the Makefile's browser
target) driven by Playwright. Playwright cannot download its own browser
here, so it launches the system one by path. Screenshots are counted with
Pillow and numpy (Pillow is declared in pyproject's test extra)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser")


def chromium_path() -> str:
    """The Chromium binary: $NEURON_SIM_CHROMIUM, else Debian's. Raises with
    the way out when there is none (a missing browser is a set-up error, not
    a reason to skip)."""
    env = os.environ.get("NEURON_SIM_CHROMIUM")
    for p in ([env] if env else []) + list(CANDIDATES) + [shutil.which("chromium") or ""]:
        if p and os.access(p, os.X_OK):
            return p
    raise RuntimeError("no Chromium found for the browser tests: run `make browser` (apt-get install chromium) "
                       "or set NEURON_SIM_CHROMIUM to a Chromium binary")


class Page:
    """One opened page: console errors and uncaught exceptions are collected.

    offline=True opens it in its own browser context with the network cut
    off, as on a machine without one: every request that is not for a
    file:// URL is aborted and listed in `left_the_file`."""

    def __init__(self, browser, width: int = 1280, height: int = 900, offline: bool = False):
        viewport = {"width": width, "height": height}
        self.context = browser.new_context(offline=True, viewport=viewport) if offline else None
        self.left_the_file: list[str] = []
        if self.context is not None:
            self.context.route("**/*", self._only_files)
            self.page = self.context.new_page()
        else:
            self.page = browser.new_page(viewport=viewport)
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text}")
                     if m.type in ("error", "assert") else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))
        self.page.on("requestfailed", lambda r: self.errors.append(f"request failed: {r.url}"))

    def _only_files(self, route) -> None:
        url = route.request.url
        if url.startswith("file:"):
            route.continue_()
        else:
            self.left_the_file.append(url)
            route.abort("internetdisconnected")

    def open(self, path: Path | str) -> "Page":
        url = path if "://" in str(path) else Path(path).resolve().as_uri()
        self.page.goto(url, wait_until="load", timeout=180_000)  # a loaded machine parses 2 MB of JS slowly
        return self

    def close(self) -> None:
        self.page.close()
        if self.context is not None:
            self.context.close()


def bokeh_ready(page) -> None:
    """Waits until Bokeh has built a view for every root on the page; at once
    on a page that has no chart (and so loads no Bokeh)."""
    page.wait_for_function("() => (window.Bokeh === undefined && !document.querySelector('[data-root-id]')) || "
                           "(window.Bokeh && Bokeh.documents.length > 0 && "
                           "Object.keys(Bokeh.index).length >= Bokeh.documents[0].roots().length)",
                           timeout=180_000)


def colored_pixels(png: bytes, rgb: tuple[int, int, int], tol: int = 40) -> int:
    """How many pixels of a screenshot are close to `rgb`: a chart drew its data."""
    import io

    import numpy as np
    from PIL import Image

    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)
    return int((np.abs(img - np.array(rgb, dtype=np.int16)).max(axis=-1) <= tol).sum())


# Hides every legend (its swatches are the glyphs' colours: a legend alone can
# fill a pixel count) and waits for the repaint; then, for the chart in the
# element `container`, the rows of each glyph's data source and the plot
# frame (where the glyphs are drawn, without legend, axes or toolbar) as a box
# in that element's screenshot.
_PLOT_FRAME = """async (container) => {
  const doc = Bokeh.documents[0];
  for (const m of doc.all_models) if (m.type === "Legend") m.visible = false;
  await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
  const el = document.querySelector(container);
  const root = el.querySelector("[data-root-id]");
  const plot = doc.get_model_by_id(root.dataset.rootId);
  const view = Bokeh.index[plot.id];
  const at = el.getBoundingClientRect(), origin = view.el.getBoundingClientRect();
  const f = view.frame.bbox, dx = origin.left - at.left, dy = origin.top - at.top;
  return {rows: plot.renderers.filter(r => r.type === "GlyphRenderer").map(r => r.data_source.get_length()),
          box: [f.x0 + dx, f.y0 + dy, f.x1 + dx, f.y1 + dy]};
}"""


class Chart:
    """A Bokeh chart as drawn: `rows`, the length of each glyph renderer's
    data source, and `png`, a screenshot of its plot frame alone with the
    legends hidden, so what colours it holds were drawn from the data."""

    def __init__(self, page, container: str):
        import io

        from PIL import Image

        info = page.evaluate(_PLOT_FRAME, container)
        self.rows: list[int] = info["rows"]
        shot = Image.open(io.BytesIO(page.locator(container).screenshot()))
        x0, y0, x1, y1 = (round(v) for v in info["box"])
        out = io.BytesIO()
        shot.crop((x0 + 1, y0 + 1, x1 - 1, y1 - 1)).save(out, format="PNG")  # inside the frame's border
        self.png = out.getvalue()

    def pixels(self, rgb: tuple[int, int, int], tol: int = 40) -> int:
        return colored_pixels(self.png, rgb, tol)
