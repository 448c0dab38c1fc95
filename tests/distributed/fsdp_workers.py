"""Per-rank bodies of test_simple_fsdp.py and test_2d_mesh.py."""
from __future__ import annotations

import torch
import torch.distributed as dist

from workers import BATCH, _global_mean, batches, device, mlp


def simple_fsdp_compiled(rank: int, ws: int) -> dict:
    """SimpleFSDP (simple_fsdp.py) under torch.compile(backend="neuron"): the
    collectives are inside the compiled graphs and run on the neuron backend."""
    import torch_neuron_sim
    from torch._dynamo.utils import counters
    from torch.distributed.device_mesh import init_device_mesh

    from simple_fsdp import simple_fsdp

    torch.neuron.reset_dynamo_metrics()
    mesh = init_device_mesh("neuron", (ws,))
    model = simple_fsdp(mlp().to(device()), mesh)
    compiled = torch.compile(model, backend="neuron")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch_neuron_sim.distributed.clear_collective_counts()
    losses = []
    per = BATCH // ws
    for x, y in batches():
        xs, ys = x[rank * per:(rank + 1) * per].to(device()), y[rank * per:(rank + 1) * per].to(device())
        loss = torch.nn.functional.mse_loss(compiled(xs), ys)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(_global_mean(loss))
    shard = next(iter(model.parameters()))
    return {
        "losses": losses,
        "graphs_with_collectives": counters["neuron"]["graphs_with_collectives"],
        "metrics_with_collectives": sum(m.has_collectives for m in torch.neuron.get_dynamo_metrics()),
        "counts": torch_neuron_sim.distributed.collective_counts(),
        "shard": (type(shard).__name__, tuple(shard.to_local().shape), str(shard.to_local().device)),
    }


def fsdp2_tp_2d(rank: int, ws: int) -> dict:
    """FSDP2 over the "dp" dimension of a (2, 2) mesh, tensor parallel over "tp"."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("neuron", (2, ws // 2), mesh_dim_names=("dp", "tp"))
    model = parallelize_module(mlp().to(device()), mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    dp = mesh["dp"].get_local_rank()
    per = BATCH // 2
    losses = []
    for x, y in batches():  # each dp rank its half of the batch; the tp ranks of one dp rank the same half
        xs, ys = x[dp * per:(dp + 1) * per].to(device()), y[dp * per:(dp + 1) * per].to(device())
        loss = torch.nn.functional.mse_loss(model(xs), ys)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(_global_mean(loss))
    return {"losses": losses, "mesh": (mesh.device_type, tuple(mesh.shape), mesh["dp"].get_local_rank(),
                                       mesh["tp"].get_local_rank())}
