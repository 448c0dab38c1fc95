"""Runs every benchmark and writes docs/benchmarks.md (the machine, torch
version, date, and one table per benchmark); the README's table is the same
text, rewritten between its benchmark markers. No figure is typed by hand:
`make bench` reruns this. Ratios are neuron time / CPU time in the same run
(see timing.py), or the two sides a table's columns name; figures that are
no ratio (the report page's size and open time, thread switches per
collective) are tables of their own. Run it on a quiet machine before
quoting figures.

With --only and --replace, the tables of the named benchmarks are measured
alone and replace theirs in docs/benchmarks.md and the README (each with a
line saying when, at what load and by which command); the other tables, the
whole run's header and the ratchets stay as the last whole run left them.

Usage: python benchmarks/run_all.py [--quick] [--no-write] [--only bench_a,bench_b [--replace]]
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

import torch

import bench_compile
import bench_distributed
import bench_memory
import bench_nki
import bench_ops
import bench_profiler
import bench_report
import bench_report_page
import bench_trainer
import ratchet
from timing import Row, Table

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
README = ROOT / "README.md"
START, END = "<!-- benchmarks: start (benchmarks/run_all.py writes this) -->", "<!-- benchmarks: end -->"

TITLES = {
    "ops": "Ops and copies (`benchmarks/bench_ops.py`)",
    "ops-step": "Where the MLP step's extra time goes (`benchmarks/bench_ops.py`; medians of batches alternating "
                "three sides: the neuron step, the same with its backward on the caller's thread (autograd's "
                "multithreading off, a diagnostic) and the CPU step. The first minus the second is what autograd's "
                "device thread costs the step, the second minus the CPU step the emulator's own cost; beside them "
                "the engine's handoff round trip timed alone in C++, a model of it)",
    "memory": "Allocation churn (`benchmarks/bench_memory.py`)",
    "random": "Dropout drawn from the device's generator against the CPU's, both on neuron "
              "(`benchmarks/bench_memory.py`; the CPU column is NEURON_SIM_RNG=cpu)",
    "report": "Cost of an active migration report (`benchmarks/bench_report.py`; ratio: report on / off)",
    "report-page": "The migration report page in headless Chromium (`benchmarks/bench_report_page.py`; the "
                   "one-chart Bokeh page, opened in the same browser, is the floor of any page with Bokeh's "
                   "JavaScript inlined, in the same run)",
    "profiler": "Cost of torch.profiler, one MLP training step on neuron (`benchmarks/bench_profiler.py`; each "
                "row names its two sides, *time* / *baseline*)",
    "compile": "torch.compile, one training step (`benchmarks/bench_compile.py`; CPU: Inductor on the CPU)",
    "compile-gain": "torch.compile against eager on neuron (`benchmarks/bench_compile.py`; the CPU column is "
                    "eager neuron)",
    "compile-cpu": "torch.compile on the CPU against eager CPU, the same steps (`benchmarks/bench_compile.py`; the "
                   "neuron column is compiled CPU, the CPU column eager CPU: what Inductor gains over eager on the "
                   "CPU, the ceiling of the gain on neuron, whose executor runs Inductor's CPU kernels)",
    "compile-cold": "torch.compile, the first step (`benchmarks/bench_compile.py`; the CPU column is a warm "
                    "compiled neuron step)",
    "compile-recompile": "torch.compile, recompiling for a second shape (`benchmarks/bench_compile.py`; both "
                         "columns compile the same step on neuron with the compile caches off: *recompile* after "
                         "another batch size was compiled, *first compile* in a fresh compiler)",
    "distributed": "Collectives, 2 ranks spawned (`benchmarks/bench_distributed.py`; CPU: CPU tensors on gloo in "
                   "the same process group; rank 0's clock)",
    "distributed-switches": "Thread switches (context switches of all of rank 0's threads) per collective "
                            "(`benchmarks/bench_distributed.py`): a small collective costs its thread switches; "
                            "neuron's agreement exchange before each collective goes through shared memory when the "
                            "ranks share a machine, and the neuron/CPU column is what neuron's side adds",
    "nki": "NKI kernels on the simulator against PyTorch on the CPU (`benchmarks/bench_nki.py`; neuron: the kernel "
           "on `neuron` tensors through wrap_nki, checks and cost model included)",
    "nki-overhead": "The NKI simulator's cost per instruction (`benchmarks/bench_nki.py`)",
    "trainer": "transformers.Trainer on a tiny GPT-2 against use_cpu=True (`benchmarks/bench_trainer.py`; per "
               "training step, 20 steps a batch after warm-up; the model step alone is the same forward, backward, "
               "clipping and AdamW step in a plain loop)",
    "trainer-overhead": "The Trainer's own share of a step: Trainer step minus model step, per side "
                        "(`benchmarks/bench_trainer.py`)",
}
# Every benchmark, in the order run: (module, repeats, repeats with --quick).
PLAN = [(bench_ops, 21, 5), (bench_memory, 9, 3), (bench_report, 15, 5), (bench_report_page, 3, 2),
        (bench_profiler, 9, 3), (bench_compile, 9, 3), (bench_distributed, 40, 3),
        (bench_nki, 5, 2), (bench_trainer, 5, 2)]
# Tables whose two timed sides are not neuron and CPU: (first, second, ratio).
COLUMNS = {
    "report": ("report on", "report off", "on/off"),
    "profiler": ("time", "baseline", "time/baseline"),
    "compile-recompile": ("recompile", "first compile", "recompile/first"),
}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def tables(rows: list[Row | Table]) -> str:
    unknown = {r.group for r in rows} - TITLES.keys()
    if unknown:
        raise ValueError(f"no title for the benchmark group(s) {sorted(unknown)}: add them to TITLES")
    out = []
    for group, title in TITLES.items():
        mine = [r for r in rows if r.group == group]
        if not mine:
            continue
        out += [f"**{title}**", ""]
        if isinstance(mine[0], Table):
            for t in mine:
                out += ["| " + " | ".join(t.columns) + " |",
                        "|" + "|".join("---" if i == 0 or c == "aim" else "---:" for i, c in enumerate(t.columns))
                        + "|"]
                out += ["| " + " | ".join(cells) + " |" for cells in t.rows]
            out.append("")
            continue
        a, b, ab = COLUMNS.get(group, ("neuron", "CPU", "neuron/CPU"))
        out += [f"| benchmark | {a} (best) | {b} (best) | {ab} (median) | best | aim (on the median) |",
                "|---|---:|---:|---:|---:|---|"]
        for r in mine:
            aim = "—" if r.aim is None else f"≤ {r.aim:.2f}× ({r.verdict})"
            out.append(f"| {r.name} | {r.neuron_s * 1e6:,.1f} µs | {r.cpu_s * 1e6:,.1f} µs | "
                       f"{r.median:.2f}× | {r.ratio:.2f}× | {aim} |")
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
    ap.add_argument("--only", default="", help="run only these benchmarks (comma-separated module names, e.g. "
                    "bench_profiler); prints, and writes only with --replace")
    ap.add_argument("--replace", action="store_true", help="with --only: replace those benchmarks' tables in "
                    "docs/benchmarks.md and the README, each marked as measured alone (ratchets untouched)")
    args = ap.parse_args()
    if args.replace and (not args.only or args.quick or args.no_write):
        ap.error("--replace needs --only, and neither --quick nor --no-write")
    torch.set_num_threads(1)
    header = environment(torch.get_num_threads())
    print(header, flush=True)
    only = set(filter(None, args.only.split(",")))
    if only - {b.__name__ for b, _, _ in PLAN}:
        ap.error(f"--only: no benchmark named {sorted(only - {b.__name__ for b, _, _ in PLAN})}")
    plan = [p for p in PLAN if not only or p[0].__name__ in only]
    rows: list[Row | Table] = []
    start = time.perf_counter()
    for bench, repeats, quick in plan:
        t0 = time.perf_counter()
        rows += bench.run(quick if args.quick else repeats)
        print(f"{bench.__name__}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    minutes = (time.perf_counter() - start) / 60
    end_load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    committed = ratchet.load()
    worse = ratchet.apply(rows, committed)
    body = f"{header} The run took {minutes:.0f} min (load average {end_load:.1f} at the end).\n\n{tables(rows)}"
    if args.replace:
        note = (f"_Measured alone (`python benchmarks/run_all.py --only {args.only} --replace`): {header} "
                f"The run took {minutes:.0f} min (load average {end_load:.1f} at the end)._")
        replace_tables(rows, note)
        print("\n" + body)
        print(f"replaced their tables in {DOC.relative_to(ROOT)} and the README's", file=sys.stderr)
        report_worse(worse)
        return
    if args.no_write or only or args.quick:
        print("\n" + body)
        report_worse(worse)
        return
    DOC.write_text(
        "# Benchmarks\n\n"
        "Written by `benchmarks/run_all.py` (`make bench`); do not edit by hand. Each row runs the same\n"
        "work on `neuron` and on the CPU in one process, alternating batches so that load from other\n"
        "processes hits both sides alike; the time columns give each side's least disturbed batch,\n"
        "*median* is the ratio of the two sides' median batches and *best* the ratio of their best\n"
        "batches. A verdict against an aim reads the median: a row that meets its aim only on its\n"
        "best batch shows as missed. *Steady state* rows preallocate outputs on both sides (the cost of the\n"
        "op); *first touch* rows make a fresh output per call, where the CPU allocator page-faults new\n"
        "memory that the arena already holds. A missed aim shows its ratchet: the best median a whole\n"
        "run has committed (`benchmarks/ratchets.json`), which a later run may beat but not exceed by\n"
        "more than 25% (run-to-run noise) without failing `make bench`. Where a table's columns name\n"
        "other sides (report on and off, profiled and not), its ratio is theirs; tables without a ratio\n"
        "(the report page's size and\n"
        "open time, thread switches per collective) give the figures themselves.\n\n" + body)
    readme = README.read_text()
    if START in readme and END in readme:
        head, rest = readme.split(START, 1)
        README.write_text(head + START + "\n" + body + END + rest.split(END, 1)[1])
    ratchet.save(ratchet.tightened(rows, committed))
    print(f"wrote {DOC.relative_to(ROOT)}, the README's table and {ratchet.FILE.relative_to(ROOT)}", file=sys.stderr)
    if report_worse(worse):
        sys.exit(1)


def _sections(region: str) -> dict[str, str]:
    """The text of each group's tables in a region tables() wrote: from its
    title line to the next title line."""
    marks = sorted((region.index(f"**{t}**\n"), g) for g, t in TITLES.items() if f"**{t}**\n" in region)
    ends = [start for start, _ in marks[1:]] + [len(region)]
    return {g: region[start:end].rstrip() + "\n" for (start, g), end in zip(marks, ends)}


def _with_tables(region: str, new: dict[str, str]) -> str:
    """region (the whole run's header line, then its tables) with the groups
    of `new` replaced or, where missing, added in TITLES' order."""
    first, _, rest = region.partition("\n\n")
    old = _sections(rest)
    kept = [new.get(g) or old[g] for g in TITLES if g in new or g in old]
    return first + "\n\n" + "\n".join(kept)


def replace_tables(rows: list[Row | Table], note: str) -> None:
    """The tables of a partial run, each under its title with `note`, in
    place of theirs in docs/benchmarks.md and the README's copy."""
    new = {}
    for group, text in _sections(tables(rows)).items():
        title, _, table = text.partition("\n\n")
        new[group] = f"{title}\n\n{note}\n\n{table}"
    doc = DOC.read_text()
    at = doc.index("\nMeasured ") + 1
    DOC.write_text(doc[:at] + _with_tables(doc[at:], new))
    readme = README.read_text()
    if START in readme and END in readme:
        head, rest = readme.split(START, 1)
        region, tail = rest.split(END, 1)
        README.write_text(head + START + "\n" + _with_tables(region.lstrip("\n"), new) + END + tail)


def report_worse(worse: list[Row]) -> bool:
    for r in worse:
        print(f"RATCHET: {r.group}: {r.name}: median {r.median:.2f}x is worse than the committed {r.committed:.2f}x "
              f"by more than {ratchet.NOISE:.0%} (aim {r.aim:.2f}x)", file=sys.stderr)
    return bool(worse)


if __name__ == "__main__":
    main()
