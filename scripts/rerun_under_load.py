"""Reruns tests that once failed under load, many times each, with busy loops
competing for the CPU, and writes the figures into docs/testing.md ("Reruns
under load"). Each run is a fresh pytest process; the output of every failed
run is kept in --keep, named after the test and the run.

The tests rerun are those whose ranks are processes with timeouts, which load
stretches: the torchrun restart after a crash, point-to-point messages and
pipeline schedules.

Each run's result is also recorded in --keep (runs-<test>.json): --resume
continues a test's series that was cut short (Ctrl-C, a deadline) up to --runs,
its table row then counts the runs of both sittings. Without --resume a series
starts again from zero.

Usage: python scripts/rerun_under_load.py [--runs N] [--load L] [--keep DIR] [--resume] [TEST...]
Exits 1 when any run failed; prints one summary line per test.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "testing.md"
START = "<!-- reruns: start (scripts/rerun_under_load.py writes this) -->"
END = "<!-- reruns: end -->"

TESTS = [
    "tests/distributed/test_torchrun.py::test_single_node_with_a_restart_after_a_crash",
    "tests/distributed/test_point_to_point.py",
    "tests/distributed/test_pipelining.py",
]
BUSY_LOOP = "while True: pass"


def file_name(test: str) -> str:
    return re.sub(r"[^\w.-]+", "_", test.removeprefix("tests/"))


def record_path(test: str, keep: Path) -> Path:
    return keep / f"runs-{file_name(test)}.json"


def load_record(test: str, keep: Path) -> list[tuple[bool, float, str]]:
    path = record_path(test, keep)
    return [tuple(r) for r in json.loads(path.read_text())] if path.exists() else []


def save_record(test: str, keep: Path, results: list) -> None:
    keep.mkdir(parents=True, exist_ok=True)
    record_path(test, keep).write_text(json.dumps(results))


def run_once(test: str, index: int, keep: Path, timeout: int) -> tuple[bool, float, str]:
    """One pytest run of test in a fresh process: (passed, seconds, pytest's summary line)."""
    t0 = time.monotonic()
    try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test], cwd=ROOT,
                           capture_output=True, text=True, timeout=timeout)
        status, out, err = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        status, out, err = "timeout", str(e.stdout or ""), str(e.stderr or "")
    seconds = time.monotonic() - t0
    summary = next((line for line in reversed(out.splitlines()) if re.search(r"\d+ (passed|failed|error)", line)),
                   f"exit status {status}")
    if status != 0:
        keep.mkdir(parents=True, exist_ok=True)
        (keep / f"{file_name(test)}-{index}.log").write_text(f"exit status: {status}\n--- stdout\n{out}\n--- stderr\n{err}")
    return status == 0, seconds, summary.strip("= ")


def start_load(count: int) -> list[subprocess.Popen]:
    """count busy loops at the lowest priority: they take every idle cycle, so the
    tests' processes are descheduled more often than on a quiet machine."""
    return [subprocess.Popen([sys.executable, "-c", BUSY_LOOP], preexec_fn=lambda: os.nice(19))
            for _ in range(count)]


ROW = re.compile(r"^\| `(?P<test>[^`]+)` \| (?P<rest>.*) \|$", re.M)


def write_doc(rows: dict[str, str], load: int) -> None:
    """Rewrites the section's table: the tests of this run replace their rows, the others keep theirs."""
    text = DOC.read_text()
    kept = {}
    if START in text:
        old = text[text.index(START):text.index(END)]
        kept = {m.group("test"): m.group("rest") for m in ROW.finditer(old)}
    kept.update(rows)
    lines = [START,
             f"Each run is a fresh pytest process, beside {load} busy "
             "loops at nice 19 (`python scripts/rerun_under_load.py`); a failed run's output is kept:",
             "",
             "| test | runs | failed | median run | last run |",
             "|---|---|---|---|---|",
             *[f"| `{test}` | {rest} |" for test, rest in kept.items()],
             END]
    if START in text:
        text = text[:text.index(START)] + "\n".join(lines) + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n## Reruns under load\n\n" + "\n".join(lines) + "\n"
    DOC.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each test (default 20)")
    parser.add_argument("--load", type=int, default=2, help="busy loops beside the runs (default 2)")
    parser.add_argument("--keep", type=Path, default=ROOT / "build" / "rerun-under-load",
                        help="where a failed run's output is kept (default build/rerun-under-load)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds before a run counts as hung")
    parser.add_argument("--no-doc", action="store_true", help="print the figures only")
    parser.add_argument("--resume", action="store_true",
                        help="continue each test's recorded series (in --keep) up to --runs instead of starting again")
    parser.add_argument("tests", nargs="*", default=TESTS)
    args = parser.parse_args()
    load = start_load(args.load)
    failures = 0
    try:
        for test in args.tests:
            results = load_record(test, args.keep) if args.resume else []
            if args.resume:
                print(f"rerun-under-load: {test}: {len(results)} runs recorded, resuming", flush=True)
            try:
                for i in range(len(results), args.runs):
                    results.append(run_once(test, i, args.keep, args.timeout))
                    save_record(test, args.keep, results)
            except KeyboardInterrupt:  # stopped (Ctrl-C): the runs that ended still count
                if not results:
                    raise
                print(f"rerun-under-load: {test}: stopped after {len(results)} runs", flush=True)
            failed = sum(not ok for ok, _, _ in results)
            failures += failed
            median = statistics.median(s for _, s, _ in results)
            print(f"rerun-under-load: {test}: {len(results)} runs, {failed} failed, median {median:.0f} s", flush=True)
            if not args.no_doc:  # after each test: a run cut short keeps what it measured
                write_doc({test: f"{len(results)} | {failed} | {median:.0f} s | {results[-1][2]}"}, args.load)
            if len(results) < args.runs:
                break
    finally:
        for p in load:
            p.kill()
            p.wait()
    if failures:
        print(f"rerun-under-load: the failed runs' output is in {args.keep}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
