"""Per-rank bodies of test_pipelining.py: torch.distributed.pipelining on the
neuron backend (its stages talk by send/recv), against the same model trained
in one process on the CPU, which each rank computes itself."""
from __future__ import annotations

import torch
import torch.distributed as dist

BATCH, MICROBATCHES = 8, 4


def device() -> torch.device:
    return torch.device("neuron", torch.neuron.current_device())


def blocks() -> list[torch.nn.Module]:
    """Four blocks (Linear + Tanh, the last Linear alone), the same weights every call."""
    torch.manual_seed(0)
    return [torch.nn.Sequential(torch.nn.Linear(8 if i == 0 else 16, 16 if i < 3 else 4),
                                *([torch.nn.Tanh()] if i < 3 else [])) for i in range(4)]


def data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(BATCH, 8, generator=g), torch.randn(BATCH, 4, generator=g)


def loss_fn(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.mse_loss(out, target)


def cpu_reference() -> tuple[float, dict[str, torch.Tensor]]:
    """One process, the whole batch: the loss, and every parameter's gradient
    (the schedules scale their summed microbatch gradients to this mean)."""
    model = torch.nn.Sequential(*blocks())
    x, y = data()
    loss = loss_fn(model(x), y)
    loss.backward()
    return loss.item(), {n: p.grad for n, p in model.named_parameters()}


def _errors(named_grads, losses, ref_loss, ref_grads) -> dict:
    """Largest gradient difference over the parameters this rank holds, and the
    loss difference (the last stage's rank only: the mean of its microbatch losses)."""
    got = {n: g.grad.cpu() for n, g in named_grads}
    out = {"params": sorted(got), "grad_err": max((got[n] - ref_grads[n]).abs().max().item() for n in got)}
    if losses:
        out["loss_err"] = abs(torch.stack([v.detach().cpu() for v in losses]).mean().item() - ref_loss)
    return out


def pipelines(rank: int, ws: int) -> dict:
    from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B,
                                              ScheduleInterleavedZeroBubble, SplitPoint, pipeline)

    dev = device()
    x, y = data()
    ref_loss, ref_grads = cpu_reference()
    out = {}

    # pipeline(): the model is traced and split at SplitPoints, one stage per rank.
    model = torch.nn.Sequential(*blocks())
    pipe = pipeline(model, mb_args=(x[:BATCH // MICROBATCHES],), split_spec={"2": SplitPoint.BEGINNING})
    stage = pipe.build_stage(rank, dev)
    sched = ScheduleGPipe(stage, n_microbatches=MICROBATCHES, loss_fn=loss_fn)
    losses: list = []
    sched.step(x.to(dev)) if rank == 0 else sched.step(target=y.to(dev), losses=losses)
    out["pipeline() + GPipe"] = _errors(stage.submod.named_parameters(), losses, ref_loss, ref_grads)
    out["stage device"] = str(next(stage.submod.parameters()).device)

    # Manual stages: blocks of the model per stage; `per_rank` stages per rank, in a loop
    # (rank r holds stages r, r + ws, ...), as the interleaved schedules lay them out.
    def manual(schedule, per_rank: int) -> dict:
        num = ws * per_rank
        bs = blocks()
        size = len(bs) // num
        held = list(range(rank, num, ws))
        mods = {s: torch.nn.Sequential(*bs[s * size:(s + 1) * size]).to(dev) for s in held}
        stages = [PipelineStage(mods[s], s, num, dev) for s in held]
        sched = schedule(stages if per_rank > 1 else stages[0], n_microbatches=MICROBATCHES, loss_fn=loss_fn)
        losses: list = []
        args = (x.to(dev),) if 0 in held else ()
        kwargs = {"target": y.to(dev), "losses": losses} if num - 1 in held else {}
        sched.step(*args, **kwargs)
        named = [(f"{s * size + int(n.split('.', 1)[0])}.{n.split('.', 1)[1]}", p)
                 for s in held for n, p in mods[s].named_parameters()]
        return _errors(named, losses, ref_loss, ref_grads)

    out["GPipe"] = manual(ScheduleGPipe, 1)
    out["1F1B"] = manual(Schedule1F1B, 1)
    out["Interleaved1F1B"] = manual(ScheduleInterleaved1F1B, 2)
    out["InterleavedZeroBubble"] = manual(ScheduleInterleavedZeroBubble, 2)
    return out
