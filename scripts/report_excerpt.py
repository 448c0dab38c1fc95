"""docs/migration-report.md shows the migration report of
examples/transformer_lm.py as `make demo` prints it. This script runs that
command and writes its report between the page's markers, so the page shows
what the current code prints, not a pasted copy; tests/docs/test_docs.py runs the
same command and fails when the page's excerpt no longer matches.

The report of this run is deterministic (counts, bytes, the device
timeline's modelled times) but for two figures: the timeline's fallback
bucket and with it the busiest stream's total, since a fallback's host kernel
is timed on the machine that runs it (docs/profiling.md). comparable() masks
those two, and only those, for the test.

Usage: python scripts/report_excerpt.py          rewrite the page's excerpt
       python scripts/report_excerpt.py --print  print the excerpt only
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "migration-report.md"
EXAMPLE = "examples/transformer_lm.py"
START = "<!-- report excerpt: start (scripts/report_excerpt.py writes this) -->"
END = "<!-- report excerpt: end -->"
RULE = "=" * 78


def example_report(timeout: float = 600) -> str:
    """The report `python -m torch_neuron_sim report examples/transformer_lm.py`
    prints at exit (the script's own output before it is left out)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_SIM_", "TORCH_NEURONX_"))}
    r = subprocess.run([sys.executable, "-m", "torch_neuron_sim", "report", EXAMPLE], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        raise RuntimeError(f"the example's report failed (exit {r.returncode}):\n{r.stderr[-2000:]}")
    lines = r.stdout.splitlines()
    first = lines.index(RULE)
    last = len(lines) - 1 - lines[::-1].index(RULE)
    return "\n".join(lines[first:last + 1]) + "\n"


# The figures of the report that are measured on this machine, not modelled.
MEASURED = re.compile(r"(busiest stream |fallback )\d+\.\d+ ms")


def comparable(report: str) -> str:
    """The report with its measured figures masked: what must not change."""
    return MEASURED.sub(r"\1<measured> ms", report)


def block(report: str) -> str:
    return f"{START}\n```\n{report}```\n{END}"


def excerpt_in_doc() -> str:
    """The report as the page shows it (between the markers)."""
    text = DOC.read_text()
    body = text.split(START, 1)[1].split(END, 1)[0]
    return body.strip("\n").removeprefix("```\n").removesuffix("```")


def main() -> None:
    report = example_report()
    if "--print" in sys.argv[1:]:
        print(report, end="")
        return
    text = DOC.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{DOC}: no excerpt markers ({START!r} ... {END!r})")
    head, rest = text.split(START, 1)
    DOC.write_text(head + block(report) + rest.split(END, 1)[1])
    print(f"wrote the report excerpt into {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
