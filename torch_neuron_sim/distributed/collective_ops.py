"""Which graph ops are collectives: the one list the compile path's graph check
(a collective compiles into the graph; Dynamo counts graphs_with_collectives) and
the profiler (a collective is a device event of its own, recorded by the process
group, not one of the graph's kernels) both read."""
from __future__ import annotations

import torch

# c10d's operators, the functional collectives (and their autograd forms) that
# torch.compile traces, and DTensor's redistribution collectives.
NAMESPACES = frozenset({"c10d", "_c10d_functional", "_c10d_functional_autograd", "c10d_functional", "_dtensor"})


def is_collective(target: object) -> bool:
    """True for an OpOverload or OpOverloadPacket of a collective namespace."""
    if isinstance(target, torch._ops.OpOverload):
        return target.namespace in NAMESPACES
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name.partition("::")[0] in NAMESPACES
    return False


# The c10d operators of send and recv, which the migration report lists apart from
# the collectives: the pre-release neuron backend had none (docs/distributed.md).
POINT_TO_POINT_OPS = frozenset({"c10d::send", "c10d::recv_", "c10d::recv_any_source_"})
