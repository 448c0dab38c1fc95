"""Data-parallel training on `neuron`, started by torchrun, unmodified from a
Trainium script:

    torchrun --nproc_per_node=2 examples/ddp_train.py

Two "nodes" on one machine (run each line in its own shell):

    torchrun --nnodes=2 --node_rank=0 --nproc_per_node=1 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:29400 examples/ddp_train.py
    torchrun --nnodes=2 --node_rank=1 --nproc_per_node=1 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:29400 examples/ddp_train.py

Each process runs on neuron:LOCAL_RANK. Rank 0 prints the loss of each step
(the mean over ranks: the loss single-process training on the whole batch
has) and the collectives this process ran.
"""
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, BATCH = 5, 16


def build_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))


def batches():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(BATCH, 32, generator=g), torch.randint(0, 8, (BATCH,), generator=g)) for _ in range(STEPS)]


def main() -> None:
    dist.init_process_group("neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("neuron", int(os.environ["LOCAL_RANK"]))
    model = DDP(build_model().to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    per = BATCH // world
    for step, (x, y) in enumerate(batches()):
        x, y = x[rank * per:(rank + 1) * per].to(device), y[rank * per:(rank + 1) * per].to(device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"step {step} loss {mean.item():.6f}", flush=True)
    if rank == 0:
        import torch_neuron_sim

        for name, c in torch_neuron_sim.distributed.collective_counts().items():
            print(f"{name}: {c['calls']} call(s), {c['bytes']} bytes", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
