"""Runs every benchmark and writes docs/benchmarks.md (the machine, torch
version, date, and one table per benchmark); the README's table is the same
text, rewritten between its benchmark markers. No figure is typed by hand:
`make bench` reruns this. Ratios are neuron time / CPU time in the same run
(see timing.py); run it on a quiet machine before quoting figures.

Usage: python benchmarks/run_all.py [--quick] [--no-write]
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
from pathlib import Path

import torch

import bench_compile
import bench_memory
import bench_ops
import bench_report
from timing import Row

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
README = ROOT / "README.md"
START, END = "<!-- benchmarks: start (benchmarks/run_all.py writes this) -->", "<!-- benchmarks: end -->"

TITLES = {
    "ops": "Ops and copies (`benchmarks/bench_ops.py`)",
    "memory": "Allocation churn (`benchmarks/bench_memory.py`)",
    "report": "Cost of an active migration report (`benchmarks/bench_report.py`; ratio: report on / off)",
    "compile": "torch.compile, one training step (`benchmarks/bench_compile.py`; CPU: Inductor on the CPU)",
    "compile-gain": "torch.compile against eager on neuron (`benchmarks/bench_compile.py`; the CPU column is "
                    "eager neuron)",
    "compile-cpu": "torch.compile on the CPU against eager CPU, the same steps (`benchmarks/bench_compile.py`; the "
                   "neuron column is compiled CPU, the CPU column eager CPU: what Inductor gains over eager on the "
                   "CPU, the ceiling of the gain on neuron, whose executor runs Inductor's CPU kernels)",
    "compile-cold": "torch.compile, the first step (`benchmarks/bench_compile.py`; the CPU column is a warm "
                    "compiled neuron step)",
}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def tables(rows: list[Row]) -> str:
    out = []
    for group, title in TITLES.items():
        mine = [r for r in rows if r.group == group]
        if not mine:
            continue
        out += [f"**{title}**", "", "| benchmark | neuron | CPU | neuron/CPU (best) | median | aim |",
                "|---|---:|---:|---:|---:|---|"]
        for r in mine:
            aim = "—" if r.aim is None else f"≤ {r.aim:.2f}× ({r.verdict})"
            out.append(f"| {r.name} | {r.neuron_s * 1e6:,.1f} µs | {r.cpu_s * 1e6:,.1f} µs | "
                       f"{r.ratio:.2f}× | {r.median:.2f}× | {aim} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def environment(threads: int) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"Measured {datetime.date.today().isoformat()} on {cpu_model()} ({os.cpu_count()} CPUs, load average "
            f"{load:.1f} at the start), torch {torch.__version__}, Python {platform.python_version()}, "
            f"{threads} torch thread(s).")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run; do not publish)")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    torch.set_num_threads(1)
    header = environment(torch.get_num_threads())
    print(header, flush=True)
    rows = bench_ops.run(5 if args.quick else 21) + bench_memory.run(3 if args.quick else 9) \
        + bench_report.run(5 if args.quick else 15) + bench_compile.run(3 if args.quick else 9)
    body = f"{header}\n\n{tables(rows)}"
    if args.no_write:
        return
    DOC.write_text(
        "# Benchmarks\n\n"
        "Written by `benchmarks/run_all.py` (`make bench`); do not edit by hand. Each row runs the same\n"
        "work on `neuron` and on the CPU in one process, alternating batches so that load from other\n"
        "processes hits both sides alike; *best* is the ratio of the least disturbed batches, *median*\n"
        "the ratio of medians. *Steady state* rows preallocate outputs on both sides (the cost of the\n"
        "op); *first touch* rows make a fresh output per call, where the CPU allocator page-faults new\n"
        "memory that the arena already holds.\n\n" + body)
    readme = README.read_text()
    if START in readme and END in readme:
        head, rest = readme.split(START, 1)
        README.write_text(head + START + "\n" + body + END + rest.split(END, 1)[1])
    print(f"wrote {DOC.relative_to(ROOT)} and the README's table", file=sys.stderr)


if __name__ == "__main__":
    main()
