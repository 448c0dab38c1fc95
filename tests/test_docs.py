"""Code excerpts in docs/ stay true to the source: a fenced block preceded by
`<!-- source: path -->` must appear verbatim in that file."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXCERPT = re.compile(r"<!-- source: (\S+) -->\s*\n```\w*\n(.*?)```", re.S)


def excerpts():
    for doc in sorted((ROOT / "docs").glob("*.md")):
        for m in EXCERPT.finditer(doc.read_text()):
            yield pytest.param(doc.name, m.group(1), m.group(2), id=f"{doc.name}:{m.group(1)}")


@pytest.mark.parametrize("doc,source,code", list(excerpts()))
def test_excerpt_matches_source(doc, source, code):
    text = (ROOT / source).read_text()
    assert code.strip() in text, f"{doc}: the excerpt from {source} no longer matches the source"


def test_there_are_excerpts_to_check():
    assert len(list(excerpts())) >= 1


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
    assert "torch " + __import__("torch").__version__.split("+")[0] in table
