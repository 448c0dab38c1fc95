"""Allocation churn on the neuron arena against the CPU allocator, in one run.

A fixed, seeded sequence of mixed sizes (mostly small, some multi-MiB) is
allocated and freed with a window of live tensors, as a training step's
temporaries are. Two variants:
  - allocate/free only (torch.empty): the allocator's own cost plus dispatch
  - allocate, write one byte per page, free: adds what fresh pages cost
    (glibc hands large blocks back to the OS on free, so the CPU pays page
    faults again; the arena keeps its pages)
Aim: <= 1.0x, no slower than CPU. Debug modes (NEURON_SIM_POISON/GUARD/PROTECT)
make this much slower by design.

Usage: python benchmarks/bench_memory.py [--repeats N] [--steps N] [--threads T]
"""
from __future__ import annotations

import random

import torch

import torch_neuron_sim  # noqa: F401  (registers the device)
from timing import Row, cli, ratio

GROUP = "memory"


def sizes(n, seed=0):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.70:
            out.append(rng.randint(1, 4096))             # scalars, biases, small activations
        elif r < 0.95:
            out.append(rng.randint(4096, 256 << 10))     # activations, gradients
        else:
            out.append(rng.randint(1 << 20, 16 << 20))   # weight-sized blocks
    return out


def churn(device, plan, touch):
    live = [None] * 16
    for i, n in enumerate(plan):
        t = torch.empty(n, dtype=torch.uint8, device=device)
        if touch:
            t[::4096].fill_(1)
        live[i % 16] = t  # frees whatever held this slot


def run(repeats: int = 9, steps: int = 4000) -> list[Row]:
    plan = sizes(steps)
    rows = []
    for touch, name in ((False, "allocate/free"), (True, "allocate/write/free")):
        rows.append(ratio(GROUP, f"{name}, {steps} allocations of 1 B to 16 MiB",
                          lambda: churn("neuron", plan, touch), lambda: churn("cpu", plan, touch),
                          1, repeats, 1.0))
    return rows


def main():
    args = cli(9, steps=(int, 4000, "allocations per batch"))
    print(f"debug modes {torch.neuron.memory.debug_modes()}")
    run(args.repeats, args.steps)


if __name__ == "__main__":
    main()
