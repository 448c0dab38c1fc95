"""Per-rank bodies of test_killed_ranks.py: one rank is killed (SIGKILL, no
chance to say goodbye) while its peers are inside a collective, a send/recv or
a pipeline step; each survivor returns the error it saw and how long it took."""
from __future__ import annotations

import os
import signal
import threading
import time

import torch
import torch.distributed as dist

import pipeline_workers as pw

KILL_AFTER = 1.0  # seconds: the survivors are inside the operation by then


def device() -> torch.device:
    return torch.device("neuron", torch.neuron.current_device())


def kill_self_after(seconds: float) -> None:
    threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()


def survive(fn) -> str:
    start = time.monotonic()
    try:
        fn()
        msg = "no error"
    except Exception as e:  # noqa: BLE001 - the message is what the test checks
        msg = f"{type(e).__name__}: {e}"
    return f"{msg} [after {time.monotonic() - start:.1f}s]"


def warm_up(dev) -> None:
    t = torch.ones(4, device=dev)
    dist.all_reduce(t)  # every rank alive and connected first
    assert t[0].item() == dist.get_world_size()


def killed_mid_collective(rank: int, ws: int) -> str | None:
    """The last rank dies while the others are inside an all_reduce that waits for it."""
    dev = device()
    warm_up(dev)
    if rank == ws - 1:
        kill_self_after(KILL_AFTER)
        time.sleep(60)
    return survive(lambda: dist.all_reduce(torch.ones(1 << 16, device=dev)))


def killed_mid_recv(rank: int, ws: int) -> str | None:
    """Rank 1 dies while rank 0 waits in recv for its tensor."""
    dev = device()
    warm_up(dev)
    if rank == 1:
        kill_self_after(KILL_AFTER)
        time.sleep(60)
    return survive(lambda: dist.recv(torch.empty(1 << 16, device=dev), src=1))


def killed_mid_send(rank: int, ws: int) -> str | None:
    """Rank 1 dies while rank 0 waits for its send of 16 MiB to be taken."""
    dev = device()
    warm_up(dev)
    if rank == 1:
        kill_self_after(KILL_AFTER)
        time.sleep(60)
    return survive(lambda: dist.send(torch.ones(1 << 22, device=dev), dst=1))


def killed_mid_pipeline_step(rank: int, ws: int) -> str | None:
    """A GPipe step over two stages; the last stage's rank dies in its second
    microbatch's forward, while the first stage waits on it."""
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    dev = device()
    warm_up(dev)
    bs = pw.blocks()
    mod = torch.nn.Sequential(*bs[rank * 2:(rank + 1) * 2]).to(dev)
    if rank == ws - 1:
        calls = []

        def die_on_second(module, args):
            calls.append(1)
            if len(calls) == 2:
                os.kill(os.getpid(), signal.SIGKILL)
        mod.register_forward_pre_hook(die_on_second)
    stage = PipelineStage(mod, rank, ws, dev)
    sched = ScheduleGPipe(stage, n_microbatches=pw.MICROBATCHES, loss_fn=pw.loss_fn)
    x, y = pw.data()
    if rank == 0:
        return survive(lambda: sched.step(x.to(dev)))
    sched.step(target=y.to(dev), losses=[])
    return "the last stage was not killed"
