"""DTensor on `neuron`: the ops the device runs as one op that DTensor has no
sharding rule for.

The device registers some CompositeImplicitAutograd ops (linear among them)
as kernels of its own, so autograd records PyTorch's formula for them instead
of decomposing them: linear's backward is `aten::linear_backward`. On the CPU
linear decomposes into mm/addmm before DTensor sees it; on `neuron` DTensor
receives linear_backward, which has neither a sharding strategy nor a
decomposition, and tensor-parallel training would stop in its first backward
with "aten.linear_backward.default does not have a sharding strategy".

The handlers here express such an op in DTensor ops that have rules (matmul,
sum), so sharding propagation and any redistribution happen as for the CPU's
decomposition. They go into DTensor's table of custom op handlers, the table
PyTorch itself uses for convolution_backward. See docs/distributed.md.
"""
from __future__ import annotations

import torch

aten = torch.ops.aten


def linear_backward(op_call, args, kwargs):
    """linear_backward(self, grad_output, weight, output_mask) in DTensor ops:
    the same products as the device's kernel and as linear's decomposition."""
    bound = dict(zip(("self", "grad_output", "weight", "output_mask"), args))
    bound.update(kwargs)
    x, grad, weight, mask = bound["self"], bound["grad_output"], bound["weight"], bound["output_mask"]
    grad_input = grad_weight = grad_bias = None
    if mask[0]:
        grad_input = torch.matmul(grad, weight)
    batch_dims = list(range(grad.dim() - 1))
    if mask[1]:
        if grad.dim() == 1:
            grad_weight = torch.outer(grad, x)
        else:
            # (rows, out)^T @ (rows, in) over the flattened batch dims; DTensor
            # redistributes where its view rule cannot keep a sharding.
            grad_weight = grad.reshape(-1, grad.shape[-1]).t() @ x.reshape(-1, x.shape[-1])
    if mask[2]:
        grad_bias = grad.sum(dim=batch_dims) if batch_dims else grad
    return grad_input, grad_weight, grad_bias


HANDLERS = {aten.linear_backward.default: linear_backward}


def install() -> None:
    """Add the handlers to DTensor's dispatcher (once per process; harmless
    on the CPU, where these ops never reach DTensor)."""
    from torch.distributed.tensor import DTensor

    table = DTensor._op_dispatcher._custom_op_handlers
    for op, handler in HANDLERS.items():
        table.setdefault(op, handler)
