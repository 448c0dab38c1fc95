"""Code excerpts in docs/ stay true to the source: a fenced block preceded by
`<!-- source: path -->` must appear verbatim in that file."""
import re
import sys
from pathlib import Path

import pytest

from torch_neuron_sim import torch_versions

ROOT = Path(__file__).resolve().parents[2]
EXCERPT = re.compile(r"<!-- source: (\S+) -->\s*\n```\w*\n(.*?)```", re.S)


def excerpts():
    for doc in sorted((ROOT / "docs").glob("*.md")):
        for m in EXCERPT.finditer(doc.read_text()):
            yield pytest.param(doc.name, m.group(1), m.group(2), id=f"{doc.name}:{m.group(1)}")


def stale_excerpts(doc_text: str) -> list[str]:
    """The sources whose excerpt in `doc_text` no longer appears in them, and
    markers not followed by a fenced block (they would check nothing)."""
    found = EXCERPT.findall(doc_text)
    bad = [source for source, code in found if code.strip() not in (ROOT / source).read_text()]
    if doc_text.count("<!-- source:") != len(found):
        bad.append(f"{doc_text.count('<!-- source:') - len(found)} marker(s) without a fenced block after them")
    return bad


@pytest.mark.parametrize("doc", sorted(p.name for p in (ROOT / "docs").glob("*.md")))
def test_excerpts_match_their_source(doc):
    bad = stale_excerpts((ROOT / "docs" / doc).read_text())
    assert not bad, f"{doc}: excerpts that no longer match their source: {bad}"


def test_a_changed_or_unfenced_excerpt_is_caught():
    """The check above on pages made up to fail: an excerpt edited away from
    its source, and a marker with no block after it."""
    real = "<!-- source: csrc/bindings/module.cpp -->\n```cpp\nPYBIND11_MODULE(_C, m) {\n```\n"
    assert stale_excerpts(real) == []
    assert stale_excerpts(real.replace("_C, m", "_D, m")) == ["csrc/bindings/module.cpp"]
    assert stale_excerpts("<!-- source: csrc/bindings/module.cpp -->\nno block\n") == [
        "1 marker(s) without a fenced block after them"]


def test_the_pages_with_excerpts_have_them_all_parsed():
    """Every page that marks an excerpt has each of its markers parsed, and the
    pages known to quote the source still do (a page whose markers stopped
    parsing would otherwise check nothing)."""
    pages = {p.name: p.read_text() for p in (ROOT / "docs").glob("*.md")}
    marked = {name for name, text in pages.items() if "<!-- source:" in text}
    assert {"architecture.md", "random.md", "semantics.md", "streams.md"} <= marked
    for name in marked:
        assert len(EXCERPT.findall(pages[name])) == pages[name].count("<!-- source:"), name


def test_the_migration_report_excerpt_is_what_the_code_prints():
    """docs/migration-report.md quotes the example's report; the current code,
    run the same way (scripts/report_excerpt.py), prints exactly that, but for
    the two figures measured on the machine (the fallback bucket's host time)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import report_excerpt
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    printed = report_excerpt.example_report()
    shown = report_excerpt.excerpt_in_doc()
    assert report_excerpt.comparable(shown) != shown  # the masked figures are there, and only they differ
    assert report_excerpt.comparable(shown) == report_excerpt.comparable(printed), (
        "docs/migration-report.md's report no longer matches what the code prints: run "
        "`python scripts/report_excerpt.py`\n" + printed)


def test_readme_example_runs_as_written():
    from conftest import run_python

    readme = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    executed, fallback, memory = r.stdout.splitlines()
    assert "'aten::linear'" in executed and fallback == "[]"  # nn.Linear runs as one op, as on the device
    assert "NeuronDeviceProperties(name='trn2'" in memory
    assert "Warning" not in r.stderr


def test_readme_benchmarks_are_the_written_ones():
    """The README's figures are docs/benchmarks.md's, as benchmarks/run_all.py wrote them."""
    readme = (ROOT / "README.md").read_text()
    table = readme.split("<!-- benchmarks: start (benchmarks/run_all.py writes this) -->\n", 1)[1]
    table = table.split("<!-- benchmarks: end -->", 1)[0]
    doc = (ROOT / "docs" / "benchmarks.md").read_text()
    assert table.strip() and table in doc, "run `make bench` (benchmarks/run_all.py) to rewrite both"
    # measured in the default venv, whichever torch runs this test (README, "Torch versions")
    assert "torch " + torch_versions.RELEASES[torch_versions.DEFAULT].tested in table
