"""docs/tutorial-add-an-op.md works as written: its Python blocks run, in order, in one
fresh interpreter (each asserts what the page says it shows), and its C++ excerpts are the
repository's code, verbatim, in the files the page names. Together: the C++ the page
teaches is the C++ that is compiled into the extension, and the Python blocks watch that
very code run (the host kernel's op executed, the device check's message)."""
import re
from pathlib import Path

from conftest import run_python

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorial-add-an-op.md"
RUN = re.compile(r"<!-- tutorial: run -->\s*\n```python\n(.*?)```", re.S)
EXCERPT = re.compile(r"<!-- source: (\S+) -->\s*\n```\w*\n(.*?)```", re.S)


def test_tutorial_python_runs_as_written():
    blocks = RUN.findall(PAGE.read_text())
    assert len(blocks) >= 6, "the tutorial's runnable blocks are marked <!-- tutorial: run -->"
    r = run_python("\n".join(blocks))
    assert r.returncode == 0, r.stderr[-3000:]
    # The outputs the page prints are the ones the code gives.
    for shown in ("['aten::cumprod', 'aten::cumprod.out', 'aten::cumprod_']\n[]\n",  # before and after extend
                  "nonzero: Expected out tensor to have scalar type Long but got scalar typeInt"):
        assert shown in r.stdout


def test_tutorial_cpp_is_the_repository_code():
    found = EXCERPT.findall(PAGE.read_text())
    files = {source for source, _ in found}
    # one excerpt per step: the op table's API, a host kernel, a device check, the fast path
    assert {"csrc/aten/execution/op_table.h", "csrc/aten/kernels/emulated_kernels.cpp",
            "csrc/aten/kernels/device_checks.cpp", "csrc/aten/execution/fast_path.cpp"} <= files
    for source, code in found:
        assert code.strip() in (ROOT / source).read_text(), f"the tutorial's excerpt of {source} no longer matches it"


def test_tutorial_is_linked():
    for page in ("docs/index.md", "docs/architecture.md", "README.md"):
        assert "tutorial-add-an-op" in (ROOT / page).read_text(), page
