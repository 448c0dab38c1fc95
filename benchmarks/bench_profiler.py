"""What profiling costs: an MLP training step on `neuron` with torch.profiler
on vs off, measured in one run (interleaved batches, best and median).

Rows, as time ratios (best and median):
  - profiler on, CPU + PrivateUse1 (device rows from the cost model) against
    no profiler   aim <= 1.2x
  - profiler on, CPU only (PyTorch's own cost, for reference) against none
  - CPU + PrivateUse1 against CPU only: what the neuron rows add
and the per-op recording hook with the profiler off, as the 1,024-element add
against CPU (compare with benchmarks/bench_ops.py's row). benchmarks/run_all.py
puts these rows in docs/benchmarks.md and the README.

Usage: python benchmarks/bench_profiler.py [--repeats N] [--steps S] [--threads T]
"""
from __future__ import annotations

import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile

import torch_neuron_sim  # noqa: F401  (registers the device)
from timing import Row, cli

GROUP = "profiler"


def make_step(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 256).to(device)
    y = torch.randint(0, 10, (64,)).to(device)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return step


def timed(fn, steps, activities=None):
    if activities is None:
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
        return (time.perf_counter() - t0) / steps
    with profile(activities=activities) as p:
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
        dt = (time.perf_counter() - t0) / steps
    p.key_averages()  # the trace is processed (and dropped) outside the timed region
    return dt


def run(repeats: int = 9, steps: int = 20) -> list[Row]:
    print(f"MLP 256-512-512-10, batch 64, SGD, on neuron; {steps} steps a batch")
    step = make_step("neuron")
    step(), step()
    both = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
    off, on, cpu_only = [], [], []
    for _ in range(repeats):
        off.append(timed(step, steps))
        on.append(timed(step, steps, both))
        cpu_only.append(timed(step, steps, [ProfilerActivity.CPU]))
    rows = [_row("MLP step, profiler CPU + neuron rows / no profiler", on, off, 1.2),
            _row("MLP step, profiler CPU only / no profiler (PyTorch's cost)", cpu_only, off, None),
            _row("MLP step, profiler CPU + neuron rows / CPU only (the neuron rows)", on, cpu_only, None)]

    # The hook with the profiler off: one relaxed atomic load per op.
    a, b = torch.randn(1024), torch.randn(1024)
    na, nb = a.to("neuron"), b.to("neuron")
    n, c = [], []
    for _ in range(repeats * 3):
        n.append(timed(lambda: na + nb, 1000))
        c.append(timed(lambda: a + b, 1000))
    rows.append(_row("add, 1,024 floats, profiler off: neuron / CPU", n, c, None))
    return rows


def _row(name, xs, base, aim):
    row = Row(GROUP, name, min(xs), min(base), min(xs) / min(base), statistics.median(xs) / statistics.median(base),
              aim)
    print(row.line(), flush=True)
    return row


def main():
    args = cli(9, steps=(int, 20, "training steps per batch"))
    run(args.repeats, args.steps)


if __name__ == "__main__":
    main()
