"""The docs' account of the code stays true to it: counts come from the native-op table,
the kernel lists name every kernel the files register, every excerpt that names its file
is one the excerpt check can read, and no open question ("(?)") is left in docs/."""
import re
from pathlib import Path

from torch_neuron_sim import native_ops
from torch_neuron_sim.execution import tracking
from torch_neuron_sim.execution.native_ops import render

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
EXCERPT = re.compile(r"<!-- source: (\S+) -->\s*\n```\w*\n(.*?)```", re.S)


def test_semantics_counts_are_the_tables():
    groups = render.sections(native_ops._HERE / f"{native_ops.DEFAULT_TABLE}.txt")
    overloads = sum(len(v) for _, ops in groups for v in ops.values())
    bases = len({b for _, ops in groups for b in ops})
    text = (ROOT / "docs" / "semantics.md").read_text()
    assert f"{overloads} operator overloads of {bases} base ops run on device" in text
    assert f"({len(tracking.untracked_op_names())} names such as `view`" in text


def test_no_open_questions_in_docs():
    left = [f"{d.name}:{i}" for d in DOCS for i, line in enumerate(d.read_text().splitlines(), 1) if "(?)" in line]
    assert not left, f"unresolved '(?)' in {left}"


def test_every_named_excerpt_is_checked():
    """An excerpt the check's pattern cannot read (indented in a list, no fence) would go unchecked."""
    for doc in DOCS:
        text = doc.read_text()
        assert text.count("<!-- source:") == len(EXCERPT.findall(text)), doc.name


def _registered(cpp: str) -> list[str]:
    """The ops a file registers on PrivateUse1."""
    text = (ROOT / "csrc" / "aten" / "kernels" / cpp).read_text()
    names = []
    for block in re.findall(r"TORCH_LIBRARY_IMPL\(aten, PrivateUse1, m\) \{(.*?)\n\}", text, re.S):
        names += re.findall(r'm\.impl\("([^"]+)"', block)
    return names


def test_kernel_lists_are_complete():
    arch = (ROOT / "docs" / "architecture.md").read_text()
    for cpp in ("factories.cpp", "views.cpp", "copy.cpp"):
        row = next(line for line in arch.splitlines() if line.startswith(f"| `aten/kernels/{cpp}` | kernels "))
        listed = set(re.findall(r"`([^`]+)`", row.split("|")[2]))
        kernels = _registered(cpp)
        assert kernels, cpp
        missing = [k for k in kernels if k not in listed]
        assert not missing, f"architecture.md's row for {cpp} misses {missing}"
