"""Neuron/CPU time ratios measured in one run, the way every benchmark here
reports them. Batches of neuron work and of CPU work alternate, so load from
other processes on a shared machine hits both sides alike; a row gives the
best batch of each side (the least disturbed), the ratio of the best batches
and the ratio of medians. The verdict against a row's aim reads the median:
one lucky batch does not meet an aim that the typical batch misses.
Figures that are no such ratio (a page's size, thread switches per call)
are a Table of their own. cli() is the command line every benchmark shares."""
from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Row:
    group: str        # which benchmark table the row belongs to
    name: str
    neuron_s: float   # best batch, seconds per call
    cpu_s: float
    ratio: float      # best neuron / best CPU
    median: float     # median neuron / median CPU: what the verdict reads
    aim: float | None  # the ratio the project aims at or under (None: measured, no aim)
    committed: float | None = None  # a missed aim's committed median (ratchet.py), when it has one

    @property
    def ok(self) -> bool:
        return self.aim is None or self.median <= self.aim

    @property
    def verdict(self) -> str:
        if self.aim is None or self.ok:
            return "" if self.aim is None else "ok"
        return "missed" if self.committed is None else f"missed; ratchet {self.committed:.2f}×"

    def line(self) -> str:
        return (f"{self.name:<46} neuron {self.neuron_s * 1e6:10.1f} us   cpu {self.cpu_s * 1e6:10.1f} us   "
                f"median {self.median:5.2f}x (best {self.ratio:4.2f}x)"
                + ("" if self.aim is None else f"   aim <= {self.aim:.2f}x {self.verdict}"))


def batch(fn: Callable[[], object], inner: int) -> float:
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def ratio(group: str, name: str, neuron_fn: Callable[[], object], cpu_fn: Callable[[], object], inner: int,
          repeats: int, aim: float | None, calls_per_fn: int = 1) -> Row:
    """Times `inner` calls of each fn per batch, `repeats` batches per side;
    a fn that itself makes `calls_per_fn` calls has its time shown per call."""
    neuron_fn(), cpu_fn()  # warm up: kernel caches, compile-cache signatures
    n, c = [], []
    for _ in range(repeats):
        n.append(batch(neuron_fn, inner) / calls_per_fn)
        c.append(batch(cpu_fn, inner) / calls_per_fn)
    row = Row(group, name, min(n), min(c), min(n) / min(c), statistics.median(n) / statistics.median(c), aim)
    print(row.line(), flush=True)
    return row


@dataclass
class Table:
    """Figures of one benchmark that are not time ratios, as the rows of a
    table with its own columns (cells already formatted)."""
    group: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)

    def add(self, *cells: str) -> None:
        self.rows.append(list(cells))
        print("   ".join(f"{c}: {v}" for c, v in zip(self.columns, cells)), flush=True)


def on_caller_thread(step: Callable[[], object]) -> Callable[[], None]:
    """`step` with autograd's multithreading off: its backward runs on the
    calling thread, as the CPU's does, not on the thread PyTorch's engine gives
    every non-CPU device (a diagnostic of what that thread costs: not how the
    device runs)."""
    import torch

    def run():
        with torch.autograd.set_multithreading_enabled(False):
            step()
    return run


def cli(repeats: int, **options: tuple[type, object, str]) -> argparse.Namespace:
    """The command line of a benchmark run on its own: --repeats N (default:
    what run_all.py uses), --threads T (torch threads; 1, as in run_all.py)
    and `options`, each name=(type, default, help) (type bool: a flag). Sets
    the threads and prints torch's version, as every benchmark's output starts."""
    import sys

    import torch

    ap = argparse.ArgumentParser(description=sys.modules["__main__"].__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=repeats, help="batches per side (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default: %(default)s)")
    for name, (kind, default, help_) in options.items():
        flag = "--" + name.replace("_", "-")
        if kind is bool:
            ap.add_argument(flag, action="store_true", help=help_)
        else:
            ap.add_argument(flag, type=kind, default=default, help=help_)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)", flush=True)
    return args
