"""Neuron/CPU time ratios measured in one run, the way every benchmark here
reports them. Batches of neuron work and of CPU work alternate, so load from
other processes on a shared machine hits both sides alike; a row gives the
best batch of each side (the least disturbed) and the ratio of medians."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable


@dataclass
class Row:
    group: str        # which benchmark table the row belongs to
    name: str
    neuron_s: float   # best batch, seconds per call
    cpu_s: float
    ratio: float      # best neuron / best CPU
    median: float     # median neuron / median CPU
    aim: float | None  # the ratio the project aims at or under (None: measured, no aim)

    @property
    def ok(self) -> bool:
        return self.aim is None or self.ratio <= self.aim

    @property
    def verdict(self) -> str:
        return "" if self.aim is None else ("ok" if self.ok else "missed")

    def line(self) -> str:
        return (f"{self.name:<46} neuron {self.neuron_s * 1e6:10.1f} us   cpu {self.cpu_s * 1e6:10.1f} us   "
                f"ratio {self.ratio:5.2f}x (median {self.median:4.2f}x)"
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
