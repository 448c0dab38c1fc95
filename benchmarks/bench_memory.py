"""Allocation churn on neuron's caching allocator against the CPU allocator,
in one run, and dropout drawn from the device's generator against dropout
drawn from the CPU's.

A fixed, seeded sequence of mixed sizes (64 B to 64 MiB, mostly small) is
allocated and freed with a window of live tensors, as a training step's
temporaries are. Two variants:
  - allocate/free only (torch.empty): the allocator's own cost plus dispatch
  - allocate, write one byte per page, free: adds what fresh pages cost
    (glibc hands large blocks back to the OS on free, so the CPU pays page
    faults again; the caching allocator keeps its segments and their pages)
Aim: <= 1.0x, no slower than CPU. Debug modes (NEURON_SIM_POISON/GUARD/PROTECT)
make this much slower by design.

Dropout on neuron draws its mask from the device's generator (the default, as
the release); the baseline is the same op drawing from the CPU generator
(NEURON_SIM_RNG=cpu), so the ratio is what the device stream costs. Aim <= 1.1x.

Usage: python benchmarks/bench_memory.py [--repeats N] [--steps N] [--threads T]
"""
from __future__ import annotations

import random

import torch

import torch_neuron_sim  # noqa: F401  (registers the device)
from timing import Row, cli, ratio

GROUP = "memory"
RANDOM_GROUP = "random"


def sizes(n, seed=0):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.70:
            out.append(rng.randint(64, 4096))            # scalars, biases, small activations
        elif r < 0.95:
            out.append(rng.randint(4096, 256 << 10))     # activations, gradients
        elif r < 0.99:
            out.append(rng.randint(1 << 20, 16 << 20))   # weight-sized blocks
        else:
            out.append(rng.randint(16 << 20, 64 << 20))  # embeddings, optimizer state
    return out


def churn(device, plan, touch):
    live = [None] * 16
    for i, n in enumerate(plan):
        t = torch.empty(n, dtype=torch.uint8, device=device)
        if touch:
            t[::4096].fill_(1)
        live[i % 16] = t  # frees whatever held this slot


def dropout_on(source, x):
    from torch_neuron_sim.devices import random as rng

    def step():
        rng.set_rng_source(source)
        try:
            for _ in range(10):
                torch.nn.functional.dropout(x, 0.1)
        finally:
            rng.set_rng_source("device")
    return step


def run(repeats: int = 9, steps: int = 4000) -> list[Row]:
    plan = sizes(steps)
    rows = []
    for touch, name in ((False, "allocate/free"), (True, "allocate/write/free")):
        rows.append(ratio(GROUP, f"{name}, {steps} allocations of 64 B to 64 MiB",
                          lambda: churn("neuron", plan, touch), lambda: churn("cpu", plan, touch),
                          1, repeats, 1.0))
    for n in (1024, 1 << 20):
        x = torch.ones(n, device="neuron")
        rows.append(ratio(RANDOM_GROUP, f"dropout of {n} floats: device generator / CPU generator",
                          dropout_on("device", x), dropout_on("cpu", x), 20, repeats, 1.1, calls_per_fn=10))
    return rows


def main():
    args = cli(9, steps=(int, 4000, "allocations per batch"))
    print(f"debug modes {torch.neuron.memory.debug_modes()}")
    run(args.repeats, args.steps)


if __name__ == "__main__":
    main()
