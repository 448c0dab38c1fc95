"""A long run, measured (run by test_long_runs.py in a fresh interpreter):

    python long_run_workload.py train STEPS     # a training loop: RSS and arena at STEPS/10 and STEPS
    python long_run_workload.py report OPS      # OPS small ops under a migration report
    python long_run_workload.py profiler OPS    # OPS small ops under torch's profiler

Prints one JSON line of figures."""
import ctypes
import gc
import json
import logging
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import torch_neuron_sim

logging.getLogger("torch_neuron_sim").setLevel(logging.ERROR)
MiB = 2**20


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def arena() -> tuple[int, int]:
    return torch.neuron.memory_allocated(), torch.neuron.memory_reserved()


def train(steps: int) -> dict:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.LayerNorm(128),
                                torch.nn.Linear(128, 10)).to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 64).to("neuron"), torch.randint(0, 10, (32,)).to("neuron")
    marks = {}
    for step in range(1, steps + 1):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step in (steps // 10, steps):
            loss.item()
            gc.collect()
            marks[step] = {"rss": rss(), "allocated": arena()[0], "reserved": arena()[1]}
    del model, opt, x, y, loss
    gc.collect()
    torch.neuron.empty_cache()
    return {"marks": marks, "after_empty_cache": arena()}


def ops(n: int, under: str) -> dict:
    """n small ops under a migration report or torch's profiler (with the
    device's rows); RSS before, at the end of the block, and after it."""
    x = torch.zeros(16, device="neuron")
    for _ in range(1000):
        x.add_(1)
    gc.collect()
    before = rss()
    out = {}
    if under == "report":
        with torch_neuron_sim.report() as r:
            for _ in range(n):
                x.add_(1)
            during = rss()
        out["report_json_bytes"] = len(r.to_json())
        out["counted"] = next(o["count"] for o in r.data["native_ops"] if o["op"] == "aten::add_.Tensor")
    else:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p:
            for _ in range(n):
                x.add_(1)
            during = rss()
        out["counted"] = sum(1 for e in p.events() if e.name == "aten::add_")
        del p
    gc.collect()
    out.update(rss_before=before, rss_during=during, rss_after=rss(), value=x.sum().item())
    # What glibc keeps of the freed memory for reuse, given back: RSS without it.
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    out["rss_after_trim"] = rss()
    return out


if __name__ == "__main__":
    kind, n = sys.argv[1], int(sys.argv[2])
    print(json.dumps(train(n) if kind == "train" else ops(n, kind)))
