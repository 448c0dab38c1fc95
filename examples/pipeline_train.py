"""Pipeline-parallel training on `neuron`, started by torchrun:

    torchrun --nproc_per_node=2 examples/pipeline_train.py [--schedule 1F1B]

torch.distributed.pipelining splits the model at a SplitPoint into two
stages, one per rank (rank r on neuron:r); the schedule (GPipe by default,
or 1F1B) runs 4 microbatches per step, and the stages hand activations and
gradients to each other with send/recv on the `neuron` backend. The last
stage's rank prints the loss of each step (the mean over microbatches: the
loss single-process training on the whole batch has) and the point-to-point
calls this process ran.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe, SplitPoint, pipeline

STEPS, BATCH, MICROBATCHES = 5, 16, 4


def build_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 64),
                               torch.nn.GELU(), torch.nn.Linear(64, 8))


def batches():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(BATCH, 32, generator=g), torch.randn(BATCH, 8, generator=g)) for _ in range(STEPS)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schedule", choices=["GPipe", "1F1B"], default="GPipe")
    schedule = {"GPipe": ScheduleGPipe, "1F1B": Schedule1F1B}[parser.parse_args().schedule]
    dist.init_process_group("neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert world == 2, "this example splits the model in two stages: run it with --nproc_per_node=2"
    device = torch.device("neuron", int(os.environ["LOCAL_RANK"]))
    example = torch.randn(BATCH // MICROBATCHES, 32)
    pipe = pipeline(build_model(), mb_args=(example,), split_spec={"2": SplitPoint.BEGINNING})
    stage = pipe.build_stage(rank, device)  # this rank's half of the model, on its device
    sched = schedule(stage, n_microbatches=MICROBATCHES, loss_fn=F.mse_loss)
    opt = torch.optim.SGD(stage.submod.parameters(), lr=0.1)
    for step, (x, y) in enumerate(batches()):
        opt.zero_grad()
        if rank == 0:
            sched.step(x.to(device))
        else:
            losses = []
            sched.step(target=y.to(device), losses=losses)
            print(f"step {step} loss {torch.stack(losses).mean().item():.6f}", flush=True)
        opt.step()
    if rank == world - 1:
        import torch_neuron_sim

        for name, c in torch_neuron_sim.distributed.collective_counts().items():
            print(f"{name}: {c['calls']} call(s), {c['bytes']} bytes", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
