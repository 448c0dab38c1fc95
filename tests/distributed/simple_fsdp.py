"""A small SimpleFSDP: fully sharded data parallel written as DTensor
parametrizations, so that torch.compile traces the parameter all-gather (in
forward) and the gradient reduce-scatter (in backward) into the compiled
graphs instead of running them from hooks, as torchtitan's SimpleFSDP does.

Each parameter is stored as a DTensor sharded on dim 0 across the mesh; a
parametrization turns it into the full tensor when the module reads it
(redistribute to Replicate: an all-gather), and declares the gradient of
that full tensor Partial(avg), so autograd reduce-scatters it back onto the
shard (the mean of the ranks' gradients, as data parallelism needs)."""
from __future__ import annotations

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.nn.utils import parametrize


class GatherForCompute(torch.nn.Module):
    """The parametrization: sharded DTensor parameter -> full local tensor."""

    def forward(self, sharded: DTensor) -> torch.Tensor:
        return sharded.redistribute(placements=[Replicate()]).to_local(grad_placements=[Partial("avg")])


def simple_fsdp(model: torch.nn.Module, mesh: DeviceMesh) -> torch.nn.Module:
    """Shards every parameter of `model` (in place) on the 1-D `mesh`."""
    for module in list(model.modules()):
        for name, param in list(module.named_parameters(recurse=False)):
            sharded = torch.nn.Parameter(distribute_tensor(param.detach(), mesh, [Shard(0)]))
            module.register_parameter(name, sharded)
            parametrize.register_parametrization(module, name, GatherForCompute(), unsafe=True)
    return model
