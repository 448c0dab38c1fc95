"""Per-rank body of the concurrent-threads test (run by dist_harness in
spawned processes): eight Python threads use the devices at once."""
from __future__ import annotations

import gc
import logging
import threading

import torch
import torch.distributed as dist
from torch._C._profiler import _ExperimentalConfig
from torch.profiler import ProfilerActivity, profile

import torch_neuron_sim

THREADS = 8
STEPS = 12
# Threads 0-2 each have a device of their own, threads 3-6 share neuron:0,
# thread 7 runs collectives on its rank's device.
OWN_DEVICES = {0: 1, 1: 2, 2: 3}
COLLECTIVE_THREAD = 7


def device_of(i: int, rank: int) -> torch.device:
    if i == COLLECTIVE_THREAD:
        return torch.device("neuron", rank)
    return torch.device("neuron", OWN_DEVICES.get(i, 0))


def train(i: int, dev: torch.device) -> list[torch.Tensor]:
    """A few steps of a small model on `dev`, on a stream of its own, with
    tensors allocated and freed between steps and a CPU fallback (kthvalue)
    per step. Deterministic: every input comes from the thread's own CPU
    generator."""
    g = torch.Generator().manual_seed(i)
    w = torch.randn(48, 48, generator=g).to(dev).requires_grad_()
    b = torch.randn(48, generator=g).to(dev).requires_grad_()
    out = []
    stream = torch.neuron.Stream(dev)
    with torch.neuron.stream(stream):
        for step in range(STEPS):
            churn = [torch.empty(256 * (k + 1) + i, device=dev) for k in range(6)]
            x = torch.randn(16, 48, generator=g).to(dev)
            loss = torch.tanh(x @ w + b).pow(2).mean()
            loss.backward()
            with torch.no_grad():
                w -= 0.1 * w.grad
                b -= 0.1 * b.grad
            w.grad, b.grad = None, None
            kth = x.kthvalue(3, dim=1).values  # a fallback op: the report records its source line
            out.append(torch.stack([loss.detach(), kth.sum()]).cpu())
            del churn
        stream.synchronize()
    out += [w.detach().cpu(), b.detach().cpu()]
    return out


def collectives(rank: int, dev: torch.device) -> list[torch.Tensor]:
    out = []
    for step in range(STEPS):
        t = torch.full((64,), float(rank + 1 + step), device=dev)
        dist.all_reduce(t)
        gathered = [torch.empty(8, device=dev) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, torch.full((8,), float(rank * 10 + step), device=dev))
        out += [t.cpu(), torch.cat(gathered).cpu()]
    return out


def work(i: int, rank: int) -> list[torch.Tensor]:
    dev = device_of(i, rank)
    return collectives(rank, dev) if i == COLLECTIVE_THREAD else train(i, dev)


def allocated() -> list[int]:
    gc.collect()
    return [torch.neuron.memory_allocated(d) for d in range(torch.neuron.device_count())]


def eight_threads(rank: int, ws: int) -> dict:
    """The same work run serially, then by eight threads at once under a
    report and the profiler; returns what the test compares."""
    logging.getLogger("torch_neuron_sim").setLevel(logging.ERROR)
    before = allocated()

    torch_neuron_sim.clear_op_tracking()
    serial = [work(i, rank) for i in range(THREADS)]
    serial_counts = torch_neuron_sim.get_op_counts()
    after_serial = allocated()

    torch_neuron_sim.clear_op_tracking()
    results: list = [None] * THREADS
    errors: list = []
    start = threading.Barrier(THREADS)

    def run(i: int) -> None:
        try:
            start.wait()
            results[i] = work(i, rank)
        except BaseException as e:  # noqa: BLE001 - reported to the test
            errors.append(f"thread {i}: {type(e).__name__}: {e}")

    with torch_neuron_sim.report() as report:
        # profile_all_threads: torch's profiler otherwise records the thread that started it only
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                     experimental_config=_ExperimentalConfig(profile_all_threads=True)) as prof:
            threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=120)
    concurrent_counts = torch_neuron_sim.get_op_counts()
    hung = [i for i, t in enumerate(threads) if t.is_alive()]
    same = [i for i in range(THREADS)
            if results[i] is not None and len(results[i]) == len(serial[i])
            and all(torch.equal(a, b) for a, b in zip(results[i], serial[i]))]
    profiled = {e.key: (e.count, e.device_time_total) for e in prof.key_averages()}
    data = report.data
    fallbacks = {f["op"]: (f["count"], sum(s["count"] for s in f["sites"])) for f in data["fallback_ops"]}
    del results, serial
    return {
        "errors": errors, "hung": hung, "same": same,
        "serial_counts": serial_counts, "concurrent_counts": concurrent_counts,
        "before": before, "after_serial": after_serial, "after": allocated(),
        "profiled_kthvalue": profiled.get("aten::kthvalue", (0, 0))[0],
        "profiled_mm": profiled.get("aten::mm", (0, 0)),
        "report_fallbacks": fallbacks,
    }
