"""Workers for test_numerics_collectives.py: integer sums in fp32 and bf16
sums rounded stochastically, on each rank of a group on the neuron backend."""
from __future__ import annotations

import torch
import torch.distributed as dist


def integer_sums(rank: int, ws: int) -> dict:
    from torch_neuron_sim.execution import numerics

    dev = torch.device("neuron", torch.neuron.current_device())
    out = {}
    for dtype in (torch.int32, torch.int64):
        small = torch.tensor([3, -5, 1 << 20], dtype=dtype, device=dev)
        dist.all_reduce(small)
        big = torch.tensor([(1 << 24) + 1, 7], dtype=dtype, device=dev)  # 2^24 + 1 is no fp32
        dist.all_reduce(big)
        chunks = torch.tensor([(1 << 24) + 1] * ws, dtype=dtype, device=dev)
        mine = torch.empty(1, dtype=dtype, device=dev)
        dist.reduce_scatter_tensor(mine, chunks)
        out[str(dtype)] = (small.cpu().tolist(), big.cpu().tolist(), mine.cpu().tolist())
    out["hits"] = numerics.rounding_hits()
    return out


def bf16_sums(rank: int, ws: int) -> list[float]:
    """Each rank adds a value under half a bf16 ulp of 1 to 1: round to nearest
    returns 1 everywhere; stochastic rounding keeps the sum on average."""
    dev = torch.device("neuron", torch.neuron.current_device())
    x = torch.full((4096,), 1.0 if rank == 0 else 0.001, dtype=torch.bfloat16, device=dev)
    dist.all_reduce(x)
    return x.cpu().float().unique().tolist() + [x.cpu().float().mean().item()]
