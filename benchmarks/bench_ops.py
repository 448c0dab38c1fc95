"""Per-op cost of the neuron device against the CPU, measured in one run.

Prints neuron time / CPU time (best and median of interleaved batches) for:
  - a 1,024-element add (per-op overhead: dispatch, aliasing, bookkeeping)
  - a 16M-element add and a 1024x1024 matmul (large ops: should cost what the CPU kernel costs)
  - 64 MiB host->device and device->host copies against a CPU clone of the same bytes
Aims (issue 2): <= 1.5x on the small add, <= 1.05x on the large ops, copies >= 0.9x the
speed of the CPU clone (i.e. time ratio <= 1/0.9 = 1.11x).

Usage: python benchmarks/bench_ops.py [--repeats N] [--threads T]
"""
import argparse
import statistics
import time

import torch

import torch_neuron_sim  # noqa: F401  (registers the device)


def batch(fn, inner):
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def ratio(name, neuron_fn, cpu_fn, inner, repeats, aim):
    # Alternate short batches of neuron and CPU work so load from other
    # processes hits both alike; report the best batch of each (the least
    # disturbed) and the median, both as neuron/CPU ratios.
    neuron_fn(), cpu_fn()  # warm up: first touch of arena pages, kernel caches
    n, c = [], []
    for _ in range(repeats):
        n.append(batch(neuron_fn, inner))
        c.append(batch(cpu_fn, inner))
    tn, tc = min(n), min(c)
    r = tn / tc
    med = statistics.median(n) / statistics.median(c)
    print(f"{name:<30} neuron {tn * 1e6:10.1f} us   cpu {tc * 1e6:10.1f} us   ratio {r:5.2f}x "
          f"(median {med:4.2f}x)   aim <= {aim:.2f}x {'ok' if r <= aim else 'MISSED'}")
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    results = {}

    a, b = torch.randn(1024), torch.randn(1024)
    na, nb = a.to("neuron"), b.to("neuron")
    results["add_1k"] = ratio("add, 1,024 elements", lambda: na + nb, lambda: a + b, 1000, args.repeats * 2, 1.5)

    a, b = torch.randn(16 << 20), torch.randn(16 << 20)
    na, nb = a.to("neuron"), b.to("neuron")
    results["add_16m"] = ratio("add, 16M elements", lambda: na + nb, lambda: a + b, 3, args.repeats, 1.05)

    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    na, nb = a.to("neuron"), b.to("neuron")
    results["mm_1024"] = ratio("matmul, 1024x1024", lambda: na @ nb, lambda: a @ b, 3, args.repeats, 1.05)

    host = torch.randn(16 << 20)  # 64 MiB
    dev = host.to("neuron")
    results["h2d_64m"] = ratio("copy 64 MiB host->device", lambda: host.to("neuron"), lambda: host.clone(), 3,
                               args.repeats, 1 / 0.9)
    results["d2h_64m"] = ratio("copy 64 MiB device->host", lambda: dev.to("cpu"), lambda: host.clone(), 3,
                               args.repeats, 1 / 0.9)
    return results


if __name__ == "__main__":
    main()
