"""The docs site: docs/ builds with Sphinx with warnings as errors (as
`make docs` does), with an API reference from the docstrings; in headless
Chromium every page loads without console errors and every internal link
(page and #anchor) resolves."""
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from browser import Page

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                        str(ROOT / "docs"), str(out)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"the docs build failed (warnings are errors):\n{r.stderr[-5000:]}"
    return out


class _Ids(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("id", "name") and v:
                self.ids.add(v)


def ids_of(path: Path) -> set[str]:
    p = _Ids()
    p.feed(path.read_text(encoding="utf-8"))
    return p.ids


def test_api_reference_lists_the_public_api(site):
    api = (site / "api" / "torch_neuron_sim.html").read_text()
    assert 'id="torch_neuron_sim.report"' in api and "html" in api
    testing = (site / "api" / "testing.html").read_text()
    assert 'id="torch_neuron_sim.testing.' in testing
    neuron = (site / "api" / "torch_neuron.html").read_text()
    for name in ("torch.neuron.memory_allocated", "torch.neuron.device_count", "torch.neuron.Stream"):
        assert f'id="{name}"' in neuron, name


def test_pages_load_and_internal_links_resolve(site, chromium):
    pages = sorted(p for p in site.rglob("*.html") if not {"_modules", "_static", "_sources"} & set(p.parts))
    assert {"index.html", "migration-report.html", "memory.html"} <= {p.name for p in pages}
    broken, errors = [], []
    ids: dict[Path, set[str]] = {}
    page = Page(chromium)
    for path in pages:
        page.errors.clear()
        page.open(path)
        assert page.page.locator("main h1").count() >= 1, path  # the page rendered its content
        errors += [f"{path.name}: {e}" for e in page.errors]
        for href in page.page.eval_on_selector_all("a[href]", "as => as.map(a => a.href)"):
            url = urlsplit(href)
            if url.scheme != "file":
                continue
            target = Path(unquote(url.path))
            if not target.exists():
                broken.append(f"{path.relative_to(site)} -> {href}")
            elif url.fragment and target.suffix == ".html":
                if target not in ids:  # parsed once per page (setdefault would parse it per link)
                    ids[target] = ids_of(target)
                if url.fragment not in ids[target]:
                    broken.append(f"{path.relative_to(site)} -> {href}")
    page.close()
    assert errors == []
    assert broken == []
