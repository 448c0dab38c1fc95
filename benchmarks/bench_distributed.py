"""Collectives on the neuron backend against the same collectives on CPU
tensors with gloo, in one run (2 ranks, spawned).

Both run in one process group created with "cpu:gloo,neuron:neuron": CPU
tensors go to gloo directly, neuron tensors to the neuron backend, which runs
the same gloo over host views of the device memory (plus a small exchange that
checks every rank agrees on the collective before it runs). Prints neuron/CPU
time ratios (best and median of interleaved batches, rank 0's clock) for:
  - all_reduce of 64 MiB (float32)
  - one DDP training step (forward, backward with gradient all-reduce, SGD) of a small MLP
  - the same step without DDP on each rank: the eager device's own share of the DDP ratio
  - send/recv of 64 MiB from rank 0 to rank 1 (aim <= 1.05x)
  - one GPipe step (4 microbatches) of a small MLP split in two stages, one per rank, against
    the same schedule on CPU tensors over gloo (aim <= 1.10x); then the same with neuron's
    backward on the calling thread (no aim): the share of autograd's device thread, which
    wakes once per microbatch's backward on each rank, on the pipeline's critical path
Aim: <= 1.05x, the views are zero-copy.
Then, where Linux's /proc gives them, the thread switches (context switches of all of rank
0's threads) per all_reduce of 4 KiB: they cost what a small collective costs on a loaded
machine. The agreement exchange before each collective goes through shared memory when the
ranks share a machine (three round trips to the group's store across machines); the table's
neuron/CPU column is what neuron's side adds.
benchmarks/run_all.py puts these figures in docs/benchmarks.md and the README.

Usage: python benchmarks/bench_distributed.py [--repeats N] [--threads T] [--rows TEXT]
  (--rows: only the rows whose name contains TEXT, case-insensitive, e.g. --rows gpipe)
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from timing import Row, Table, cli, on_caller_thread

GROUP, SWITCHES_GROUP = "distributed", "distributed-switches"
ROWS = os.environ.get("NEURON_SIM_BENCH_ROWS", "")  # --rows, handed to the spawned ranks


def timed(fn, inner):
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def compare(rank, name, neuron_fn, cpu_fn, inner, repeats, aim) -> Row | None:
    """Rank 0's clock; every batch starts at a barrier, so both ranks time the same batches.
    None for a row --rows leaves out (both ranks decide alike: the filter is in their environment)."""
    if ROWS.lower() not in name.lower():
        return None
    neuron_fn(), cpu_fn()  # warm up: connections, arena pages, buckets
    n, c = [], []
    for _ in range(repeats):
        n.append(timed(neuron_fn, inner))
        c.append(timed(cpu_fn, inner))
    row = Row(GROUP, name, min(n), min(c), min(n) / min(c), statistics.median(n) / statistics.median(c), aim)
    if rank == 0:
        print(row.line(), flush=True)
    return row


def switches():
    """Context switches of every thread of this process so far (Linux)."""
    n = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/status") as f:
                n += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except OSError:
            pass
    return n


def switches_per_call(rank, dev, calls=200):
    per = {}
    for kind, t in (("neuron", torch.ones(1024, device=dev)), ("cpu", torch.ones(1024))):
        for _ in range(20):
            dist.all_reduce(t)
        dist.barrier()
        s0 = switches()
        for _ in range(calls):
            dist.all_reduce(t)
        per[kind] = (switches() - s0) / calls
    return per


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                               torch.nn.ReLU(), torch.nn.Linear(512, 10))


def p2p(t, peer, rank):
    return (lambda: dist.send(t, peer)) if rank == 0 else (lambda: dist.recv(t, peer))


def gpipe_step(rank, dev, backward_on_caller=False):
    """One training step of mlp() split after its second Linear, on `dev` (rank r's
    stage on neuron:r, or on the CPU, whose send/recv go to gloo). backward_on_caller:
    each backward on the calling thread (timing.on_caller_thread, a diagnostic)."""
    from torch.distributed.pipelining import ScheduleGPipe, SplitPoint, pipeline

    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    pipe = pipeline(mlp(), mb_args=(x[:16],), split_spec={"3": SplitPoint.BEGINNING})
    stage = pipe.build_stage(rank, dev)
    sched = ScheduleGPipe(stage, n_microbatches=4, loss_fn=torch.nn.functional.cross_entropy)
    opt = torch.optim.SGD(stage.submod.parameters(), lr=0.01)
    x, y = x.to(dev), y.to(dev)

    def run():
        opt.zero_grad()
        sched.step(x) if rank == 0 else sched.step(target=y)
        opt.step()

    return on_caller_thread(run) if backward_on_caller else run


def worker(rank, world, port, repeats, threads, out):
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(threads)
    dist.init_process_group("cpu:gloo,neuron:neuron", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=30))
    dev = torch.device("neuron", rank)
    if rank == 0:
        print(f"{world} ranks, {threads} torch thread(s) each", flush=True)

    cpu = torch.ones(16 << 20)  # 64 MiB of float32
    neu = cpu.to(dev)
    rows = [compare(rank, "all_reduce 64 MiB", lambda: dist.all_reduce(neu), lambda: dist.all_reduce(cpu), 2, repeats, 1.05)]

    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    xn, yn = x.to(dev), y.to(dev)
    models = {"cpu": DDP(mlp()), "neuron": DDP(mlp().to(dev)), "cpu alone": mlp(), "neuron alone": mlp().to(dev)}
    opts = {k: torch.optim.SGD(m.parameters(), lr=0.01) for k, m in models.items()}

    def step(kind, xb, yb):
        def run():
            loss = torch.nn.functional.cross_entropy(models[kind](xb), yb)
            opts[kind].zero_grad()
            loss.backward()
            opts[kind].step()
        return run

    rows.append(compare(rank, "DDP step, MLP 256-512-512-10, batch 64", step("neuron", xn, yn), step("cpu", x, y),
                        5, repeats, 1.05))
    # The same step without DDP, each rank on its own: what eager neuron costs
    # on this step with no collective at all, for the DDP row to be read against.
    rows.append(compare(rank, "same step without DDP (no collective)", step("neuron alone", xn, yn),
                        step("cpu alone", x, y), 5, repeats, None))
    # point-to-point: rank 0 sends, rank 1 receives
    peer = 1 - rank
    rows.append(compare(rank, "send/recv 64 MiB", p2p(neu, peer, rank), p2p(cpu, peer, rank), 2, repeats, 1.05))
    rows.append(compare(rank, "GPipe step, MLP 256-512-512-10, 2 stages", gpipe_step(rank, dev),
                        gpipe_step(rank, torch.device("cpu")), 5, repeats, 1.10))
    # The same with each backward on the calling thread: what autograd's device thread costs the row.
    rows.append(compare(rank, "GPipe step, neuron backward on the caller's thread (diagnostic)",
                        gpipe_step(rank, dev, backward_on_caller=True), gpipe_step(rank, torch.device("cpu")), 5,
                        repeats, None))
    per = switches_per_call(rank, dev) if os.path.isdir("/proc/self/task") and not ROWS else None
    dist.destroy_process_group()
    if rank == 0:
        Path(out).write_text(json.dumps({"rows": [dataclasses.asdict(r) for r in rows if r is not None],
                                         "switches": per}))


def run(repeats: int = 15, threads: int = 1) -> list[Row | Table]:
    """Spawns 2 ranks; rank 0 hands its figures back through a file."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rank0.json"
        ctx = mp.start_processes(worker, args=(2, port, repeats, threads, str(out)), nprocs=2, join=False,
                                 start_method="spawn")
        # A hard deadline (a collective stuck past the group's timeout, a rank that never starts):
        # the ranks are killed and the benchmark fails instead of hanging make bench.
        deadline = time.monotonic() + 120 + 20 * repeats
        while not ctx.join(timeout=1):
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    p.kill()
                raise RuntimeError(f"bench_distributed: the ranks did not finish within {120 + 20 * repeats} s; killed")
        got = json.loads(out.read_text())
    figures: list[Row | Table] = [Row(**r) for r in got["rows"]]
    if got["switches"]:
        t = Table(SWITCHES_GROUP, ["collective", "neuron", "CPU (gloo)", "neuron/CPU"])
        n, c = got["switches"]["neuron"], got["switches"]["cpu"]
        t.add("all_reduce 4 KiB", f"{n:.1f} /call", f"{c:.1f} /call", f"{n / c:.2f}×")
        figures.append(t)
    return figures


def main():
    args = cli(40, rows=(str, "", "only the rows whose name contains this text (case-insensitive)"))
    os.environ["NEURON_SIM_BENCH_ROWS"] = args.rows  # read by the spawned ranks at import
    run(args.repeats, args.threads)


if __name__ == "__main__":
    main()
