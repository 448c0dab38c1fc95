"""Per-op cost of the neuron device against the CPU, measured in one run.

Rows (neuron time / CPU time, best and median of interleaved batches):
  - a 1,024-element add: the per-op overhead (dispatch, aliasing, bookkeeping)
  - an MLP training step (forward, backward, SGD step): many small ops in a row
  - large ops (16M-element add, 1024x1024 matmul) and 64 MiB copies, twice:
      steady state  outputs preallocated on both sides (out=, copy_ into a
                    tensor that exists): the cost of the op itself
      first touch   a fresh output every call: adds what a new output costs.
                    The CPU allocator returns a large freed block to the OS
                    and page-faults a fresh one on first write; the arena
                    keeps its pages, so neuron comes out faster here.

  - the MLP step again, against a CPU step whose backward is handed to a
    worker thread: PyTorch's autograd engine runs the backward of any non-CPU
    device (CUDA, TorchNeuron, this emulator) on a per-device worker thread and
    the caller waits for it, while the CPU's runs on the caller's thread. That
    handoff (two thread wake-ups per step) is the engine's, not the backend's,
    and on this VM it costs about as much as a small step's whole backward, so
    the step is also compared with a CPU step that makes the same handoff,
    and the handoff's own cost is a row of its own.

--breakdown also prints the thread switches per step on each side.

Usage: python benchmarks/bench_ops.py [--repeats N] [--threads T] [--breakdown]
"""
from __future__ import annotations

import queue
import resource
import threading

import torch

import torch_neuron_sim  # noqa: F401  (registers the device)
from timing import Row, cli, ratio

GROUP = "ops"


def mlp_step(device: str):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64, device=device), torch.randint(0, 10, (32,), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def mlp_step_backward_on_worker():
    """The CPU step with its backward handed to a worker thread and awaited,
    one round trip per step as the autograd engine makes for a device (here
    through Python queues, so the GIL changes hands too)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    todo, done = queue.SimpleQueue(), queue.SimpleQueue()

    def worker():
        while True:
            todo.get().backward()
            done.put(None)
    threading.Thread(target=worker, daemon=True).start()

    def step():
        opt.zero_grad(set_to_none=True)
        todo.put(torch.nn.functional.cross_entropy(model(x), y))
        done.get()
        opt.step()
    return step


def switches_per_call(fn, calls: int = 200) -> float:
    """Voluntary thread switches (waits) per call: 0 for a step on one thread."""
    fn()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
    for _ in range(calls):
        fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - before) / calls


def breakdown() -> None:
    neuron, cpu, worker = mlp_step("neuron"), mlp_step("cpu"), mlp_step_backward_on_worker()
    print(f"thread switches per MLP step: neuron {switches_per_call(neuron):.2f}, CPU {switches_per_call(cpu):.2f}, "
          f"CPU with backward on a worker {switches_per_call(worker):.2f}")


def run(repeats: int = 21) -> list[Row]:
    rows = []
    a, b = torch.randn(1024), torch.randn(1024)
    na, nb = a.to("neuron"), b.to("neuron")
    rows.append(ratio(GROUP, "add, 1,024 floats (per-op overhead)", lambda: na + nb, lambda: a + b,
                      1000, repeats * 2, 1.3))
    neuron_step, cpu_step, worker_step = mlp_step("neuron"), mlp_step("cpu"), mlp_step_backward_on_worker()
    rows.append(ratio(GROUP, "MLP training step (64-128-128-10, batch 32)", neuron_step, cpu_step,
                      50, repeats, 1.15))
    rows.append(ratio(GROUP, "MLP step vs CPU step, backward on a worker", neuron_step,
                      worker_step, 50, repeats, 1.15))
    rows.append(ratio(GROUP, "autograd handoff: CPU, backward on worker / CPU", worker_step,
                      cpu_step, 50, repeats, None))

    a, b = torch.randn(16 << 20), torch.randn(16 << 20)
    na, nb = a.to("neuron"), b.to("neuron")
    out, nout = torch.empty_like(a), torch.empty_like(na)
    rows.append(ratio(GROUP, "add, 16M floats, steady state", lambda: torch.add(na, nb, out=nout),
                      lambda: torch.add(a, b, out=out), 3, repeats, 1.05))
    rows.append(ratio(GROUP, "add, 16M floats, first touch", lambda: na + nb, lambda: a + b, 3, repeats, 1.05))
    del out, nout

    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    na, nb = a.to("neuron"), b.to("neuron")
    out, nout = torch.empty_like(a), torch.empty_like(na)
    rows.append(ratio(GROUP, "matmul 1024x1024, steady state", lambda: torch.mm(na, nb, out=nout),
                      lambda: torch.mm(a, b, out=out), 3, repeats, 1.05))
    rows.append(ratio(GROUP, "matmul 1024x1024, first touch", lambda: na @ nb, lambda: a @ b, 3, repeats, 1.05))

    host = torch.randn(16 << 20)  # 64 MiB
    dev, host_out, cpu_out = host.to("neuron"), torch.empty_like(host), torch.empty_like(host)
    # Copies against a CPU copy of the same bytes; aim: at least 0.9x its speed.
    rows.append(ratio(GROUP, "copy 64 MiB host->device, steady state", lambda: dev.copy_(host),
                      lambda: cpu_out.copy_(host), 3, repeats, 1 / 0.9))
    rows.append(ratio(GROUP, "copy 64 MiB device->host, steady state", lambda: host_out.copy_(dev),
                      lambda: cpu_out.copy_(host), 3, repeats, 1 / 0.9))
    rows.append(ratio(GROUP, "copy 64 MiB host->device, first touch", lambda: host.to("neuron"),
                      lambda: host.clone(), 3, repeats, 1 / 0.9))
    rows.append(ratio(GROUP, "copy 64 MiB device->host, first touch", lambda: dev.to("cpu"),
                      lambda: host.clone(), 3, repeats, 1 / 0.9))
    return rows


def main():
    args = cli(21, breakdown=(bool, False, "also: the thread switches per MLP step"))
    run(args.repeats)
    if args.breakdown:
        breakdown()


if __name__ == "__main__":
    main()
