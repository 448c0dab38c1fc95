"""Allocation churn on the neuron arena against the CPU allocator, in one run.

A fixed, seeded sequence of mixed sizes (mostly small, some multi-MiB) is
allocated and freed with a window of live tensors, as a training step's
temporaries are. Two variants:
  - allocate/free only (torch.empty): the allocator's own cost plus dispatch
  - allocate, write one byte per page, free: adds what fresh pages cost
    (glibc hands large blocks back to the OS on free, so the CPU pays page
    faults again; the arena keeps its pages)
Prints neuron time / CPU time; aim (issue 3): <= 1.0x, no slower than CPU.
Debug modes (NEURON_SIM_POISON/GUARD/PROTECT) make this much slower by design.

Usage: python benchmarks/bench_memory.py [--repeats N] [--steps N]
"""
import argparse
import random
import statistics
import time

import torch

import torch_neuron_sim  # noqa: F401  (registers the device)


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


def measure(device, plan, touch, repeats):
    churn(device, plan, touch)  # warm up
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        churn(device, plan, touch)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=4000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    plan = sizes(args.steps)
    print(f"torch {torch.__version__}; {args.steps} allocations of 1 B to 16 MiB, 16 live; "
          f"debug modes {torch.neuron.memory.debug_modes()}")
    for touch, name in ((False, "allocate/free"), (True, "allocate/write/free")):
        n, c = [], []
        for _ in range(3):  # interleaved, so machine noise hits both
            n.append(measure("neuron", plan, touch, args.repeats))
            c.append(measure("cpu", plan, touch, args.repeats))
        tn, tc = min(n), min(c)
        r = tn / tc
        print(f"{name:<22} neuron {tn / args.steps * 1e6:8.2f} us/alloc   cpu {tc / args.steps * 1e6:8.2f} us/alloc"
              f"   ratio {r:5.2f}x   (aim <= 1.00x) {'ok' if r <= 1.0 else 'MISSED'}")


if __name__ == "__main__":
    main()
