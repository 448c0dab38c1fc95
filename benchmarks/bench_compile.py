"""torch.compile(backend="neuron") against eager neuron and against Inductor
on the CPU, one training step (forward, backward, SGD), measured in one run.

Models: an MLP (three Linear layers with GELU) and a small pre-norm transformer
block (LayerNorm, 4-head causal attention, GELU MLP). For each: the time of a
warm training step (Dynamo and Inductor caches warm) with
  compiled neuron   torch.compile(model, backend="neuron")   (Inductor executor)
  eager neuron      the same model, not compiled
  compiled CPU      torch.compile(model) on the CPU          (Inductor)
and the ratios compiled neuron / eager neuron (aim <= 0.8x) and compiled
neuron / compiled CPU (aim <= 1.1x), best and median of interleaved batches.
The cold compile time (first step of the compiled neuron model, forward and
backward graphs; Inductor's on-disk caches make later runs faster) is a row too.
benchmarks/run_all.py puts these rows in docs/benchmarks.md and the README.

Usage: python benchmarks/bench_compile.py [--repeats N] [--threads T]
"""
import argparse
import statistics
import time

import torch

import torch_neuron_sim  # noqa: F401  (registers the device)
from timing import Row

GROUP, GAIN_GROUP, COLD_GROUP = "compile", "compile-gain", "compile-cold"


class MLP(torch.nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, 4 * d),
                                       torch.nn.GELU(), torch.nn.Linear(4 * d, d))

    def forward(self, x):
        return self.net(x)


class Block(torch.nn.Module):
    def __init__(self, d=128, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


def make_step(model, run, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step():
        loss = torch.nn.functional.mse_loss(run(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    return step


def timed(step, inner):
    t0 = time.perf_counter()
    for _ in range(inner):
        step()
    return (time.perf_counter() - t0) / inner


def bench(name, make_model, shape, repeats, inner):
    torch.manual_seed(0)
    x_cpu, y_cpu = torch.randn(*shape), torch.randn(*shape)
    steps = {}
    cold = None
    for label, device, compiled in (("compiled neuron", "neuron", "neuron"), ("eager neuron", "neuron", None),
                                    ("compiled cpu", "cpu", "inductor")):
        torch.manual_seed(0)
        model = make_model().to(device)
        run = torch.compile(model, backend=compiled) if compiled else model
        step = make_step(model, run, x_cpu.to(device), y_cpu.to(device))
        t0 = time.perf_counter()
        step()  # compiles (cold) on the first call
        if label == "compiled neuron":
            cold = time.perf_counter() - t0
        step()
        steps[label] = step
    times = {k: [] for k in steps}
    for _ in range(repeats):
        for k, s in steps.items():
            times[k].append(timed(s, inner))
    best = {k: min(v) for k, v in times.items()}
    med = {k: statistics.median(v) for k, v in times.items()}
    rows = [Row(GROUP, f"{name}: compiled neuron vs compiled CPU", best["compiled neuron"], best["compiled cpu"],
                best["compiled neuron"] / best["compiled cpu"],
                med["compiled neuron"] / med["compiled cpu"], 1.1),
            Row(GAIN_GROUP, f"{name}: compiled neuron vs eager neuron", best["compiled neuron"],
                best["eager neuron"], best["compiled neuron"] / best["eager neuron"],
                med["compiled neuron"] / med["eager neuron"], 0.8),
            Row(COLD_GROUP, f"{name}: first compiled step (cold Inductor compile)", cold, best["compiled neuron"],
                cold / best["compiled neuron"], cold / med["compiled neuron"], None)]
    for r in rows:
        print(r.line(), flush=True)
    return rows


def run(repeats: int = 9) -> list[Row]:
    return (bench("MLP 256-1024-1024-256, batch 64", MLP, (64, 256), repeats, 10)
            + bench("transformer block d=128 h=4, batch 8x64", Block, (8, 64, 128), repeats, 5))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    run(args.repeats)


if __name__ == "__main__":
    main()
