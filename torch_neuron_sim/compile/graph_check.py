"""What the device compiler accepts. A graph compiles to one NEFF only if
every op in it has a device lowering: the real backend's native-op table
(torch_neuron_sim.native_ops), view/metadata ops, and custom ops with a
kernel for the neuron device. Any other op makes the compilation fail, and
the real backend then runs the graph eagerly (graph-level fallback)."""
from __future__ import annotations

import torch

from ..distributed.collective_ops import is_collective
from ..execution import native_ops, tracking

# Graph plumbing AOTAutograd and the partitioner emit (no device computation).
_PLUMBING = {"aten::_to_copy", "aten::copy_", "aten::copy", "aten::clone", "aten::empty", "aten::empty_strided",
             "aten::empty_like", "aten::zeros", "aten::zeros_like", "aten::ones", "aten::ones_like",
             "aten::full", "aten::full_like", "aten::scalar_tensor", "aten::lift_fresh_copy", "aten::_unsafe_view",
             "aten::detach", "aten::alias", "aten::as_strided", "aten::view", "aten::_local_scalar_dense"}


def op_name(op: torch._ops.OpOverload) -> tuple[str, str]:
    s = op._schema
    return (f"{s.name}.{s.overload_name}" if s.overload_name else s.name), s.name


def non_native_ops(gm: torch.fx.GraphModule) -> list[str]:
    """Operator names in the graph the device cannot compile, sorted."""
    native = set(native_ops.current())
    untracked = set(tracking.untracked_op_names())  # view/metadata ops, "aten::view"
    bad = set()
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        name, base = op_name(node.target)
        ns = base.partition("::")[0]
        if name in native or base in native or base in _PLUMBING or base in untracked or ns == "prims":
            continue
        if is_collective(node.target):
            continue
        if ns != "aten" and torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1"):
            continue  # a custom op with a device kernel (torch.library.custom_op(device_types="neuron"))
        bad.add(name)
    return sorted(bad)


def has_collectives(gm: torch.fx.GraphModule) -> bool:
    return any(node.op == "call_function" and is_collective(node.target) for node in gm.graph.nodes)


def node_count(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "call_function")
