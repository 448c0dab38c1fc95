"""`make long-runs`: the long runs of tests/memory/test_long_runs.py at the
sizes of `make test-deep` (a 10,000-step training loop, 1,000,000 ops under a
migration report, 100,000 under torch's profiler), each in a fresh interpreter
(tests/memory/long_run_workload.py), and their figures written between the
markers of docs/memory.md ("Long runs"), beside the bounds the test holds.

Usage: python scripts/long_runs.py          run them and rewrite the page's figures
       python scripts/long_runs.py --print  run them and print the figures only
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "memory.md"
WORKLOAD = ROOT / "tests" / "memory" / "long_run_workload.py"
START = "<!-- long runs: start (scripts/long_runs.py writes this) -->"
END = "<!-- long runs: end -->"
STEPS, REPORT_OPS, PROFILER_OPS = 10_000, 1_000_000, 100_000
MiB = 2**20


def run(kind: str, n: int) -> tuple[dict, float]:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, str(WORKLOAD), kind, str(n)], capture_output=True, text=True,
                       timeout=3600)
    if r.returncode:
        sys.exit(f"long_run_workload.py {kind} {n} failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1]), time.monotonic() - t0


def mib(b: int) -> str:
    return f"{b / MiB:+.1f} MiB" if b else "0 MiB"


def figures() -> list[str]:
    train, train_s = run("train", STEPS)
    early, late = train["marks"][str(STEPS // 10)], train["marks"][str(STEPS)]
    report, report_s = run("report", REPORT_OPS)
    prof, prof_s = run("profiler", PROFILER_OPS)
    report_grow = report["rss_during"] - report["rss_before"]
    prof_grow = prof["rss_during"] - prof["rss_before"]
    return [
        "Figures of the last run (`make long-runs`, the sizes of `make test-deep`):",
        "",
        "| run | measured | bound |",
        "|---|---|---|",
        f"| training loop, {STEPS:,} steps ({train_s:.0f} s) | host RSS {late['rss'] / MiB:.0f} MiB at step "
        f"{STEPS:,}, {mib(late['rss'] - early['rss'])} since step {STEPS // 10:,}; arena allocated "
        f"{early['allocated']:,} B and reserved {early['reserved']:,} B at step {STEPS // 10:,}, "
        f"{late['allocated']:,} B and {late['reserved']:,} B at step {STEPS:,}; after `empty_cache()`: "
        f"{train['after_empty_cache'][0]} B allocated, {train['after_empty_cache'][1]} B reserved "
        f"| RSS +16 MiB; arena unchanged; 0 after `empty_cache()` |",
        f"| {REPORT_OPS:,} ops under a migration report ({report_s:.0f} s) | RSS {mib(report_grow)} while "
        f"active ({report_grow / REPORT_OPS:.0f} B per op), {mib(report['rss_after'] - report['rss_before'])} "
        f"after it stopped, {mib(report['rss_after_trim'] - report['rss_before'])} once glibc gives back "
        f"the freed memory it keeps (`malloc_trim`); its JSON {report['report_json_bytes'] / MiB:.2f} MiB "
        f"| 512 B per op (+16 MiB); JSON 4 MiB |",
        f"| {PROFILER_OPS:,} ops under torch's profiler ({prof_s:.0f} s) | RSS {mib(prof_grow)} while active "
        f"({prof_grow / PROFILER_OPS:.0f} B per op) | 16 KiB per op (+16 MiB) |",
    ]


def main() -> None:
    rows = figures()
    if sys.argv[1:] == ["--print"]:
        print("\n".join(rows))
        return
    text = DOC.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(head + START + "\n" + "\n".join(rows) + "\n" + END + tail)


if __name__ == "__main__":
    main()
