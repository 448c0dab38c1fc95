"""What profiling costs: an MLP training step on `neuron` with torch.profiler
on vs off, measured in one run (interleaved batches, best and median).

Prints, as time ratios against the same step with no profiler:
  - profiler on, CPU + PrivateUse1 (device rows from the cost model)   aim <= 1.2x
  - profiler on, CPU only (PyTorch's own cost, for reference)
and the per-op recording hook with the profiler off, as the 1,024-element add
against CPU (compare with benchmarks/bench_ops.py before the profiler existed).

Usage: python benchmarks/bench_profiler.py [--repeats N] [--steps S]
"""
import argparse
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile

import torch_neuron_sim  # noqa: F401  (registers the device)


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread; MLP 256-512-512-10, batch 64, SGD, on neuron")
    step = make_step("neuron")
    step(), step()
    both = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
    off, on, cpu_only = [], [], []
    for _ in range(args.repeats):
        off.append(timed(step, args.steps))
        on.append(timed(step, args.steps, both))
        cpu_only.append(timed(step, args.steps, [ProfilerActivity.CPU]))
    base = min(off)
    print(f"{'no profiler':<40} {base * 1e3:8.3f} ms/step")
    for name, xs, aim in (("profiler CPU + neuron rows", on, 1.2), ("profiler CPU only (PyTorch's cost)", cpu_only,
                                                                     None)):
        r, med = min(xs) / base, statistics.median(xs) / statistics.median(off)
        verdict = "" if aim is None else f"   aim <= {aim:.2f}x {'ok' if r <= aim else 'MISSED'}"
        print(f"{name:<40} {min(xs) * 1e3:8.3f} ms/step   ratio {r:5.2f}x (median {med:4.2f}x){verdict}")
    r_dev = min(on) / min(cpu_only)
    print(f"{'neuron rows on top of CPU profiling':<40} ratio {r_dev:5.2f}x")

    # The hook with the profiler off: one relaxed atomic load per op.
    a, b = torch.randn(1024), torch.randn(1024)
    na, nb = a.to("neuron"), b.to("neuron")
    n, c = [], []
    for _ in range(args.repeats * 3):
        n.append(timed(lambda: na + nb, 1000))
        c.append(timed(lambda: a + b, 1000))
    print(f"{'add 1,024 elements, profiler off':<40} neuron/CPU {min(n) / min(c):5.2f}x "
          f"(median {statistics.median(n) / statistics.median(c):4.2f}x)")


if __name__ == "__main__":
    main()
