"""Headless Chromium for the tests that look at pages as a person would:
Debian's `chromium` (installed by `make test`, see the Makefile's browser
target) driven by Playwright. Playwright cannot download its own browser
here, so it launches the system one by path."""
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
    """One opened page: console errors and uncaught exceptions are collected."""

    def __init__(self, browser, width: int = 1280, height: int = 900):
        self.page = browser.new_page(viewport={"width": width, "height": height})
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text}")
                     if m.type in ("error", "assert") else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))
        self.page.on("requestfailed", lambda r: self.errors.append(f"request failed: {r.url}"))

    def open(self, path: Path | str) -> "Page":
        url = path if "://" in str(path) else Path(path).resolve().as_uri()
        self.page.goto(url, wait_until="load", timeout=180_000)  # a loaded machine parses 2 MB of JS slowly
        return self

    def close(self) -> None:
        self.page.close()


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
