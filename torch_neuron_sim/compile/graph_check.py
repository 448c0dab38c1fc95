"""What the device compiler lowers. The release lowers each graph through
torch's decompositions to core ATen and on to StableHLO, so an op has a
lowering when it is
  * a native op of the device (any overload of it: .Scalar, .Tensor, the
    in-place op_, out=), or in core ATen (the op set the StableHLO lowering
    covers; any overload of a core op, as sort.stable of sort: the overloads
    differ in argument forms, not in what is computed), or graph plumbing, a
    view or metadata op, a prims op;
  * a collective, or a custom op with a kernel for the neuron device;
  * a runtime assertion or shape constraint (_assert_async, _assert_scalar,
    sym_constrain_range, ...): the compiler makes it a check of the compiled
    program, as Inductor does, not a computation;
  * or an op whose decomposition (core ATen's table, else torch's registered
    decompositions, else its composite definition) consists of ops with a lowering, checked on the node's
    example values.
Sparse, quantized and oneDNN (mkldnn) ops have none: the release lists them
as not supported. Anything else left without a lowering makes the graph fail
to compile (compiler.py).

The same set decides, while a compiled graph launches, whether an op the
launch dispatches (an extern call of the generated code, an op in a custom
op's body) runs on the device as part of the graph or falls back: the C++
op path asks `lowered_in_graph` once per op (aten/execution/graph_lowering.h)."""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import torch

from .. import _C
from ..distributed.collective_ops import is_collective
from ..execution import native_ops, tracking

# Graph plumbing AOTAutograd and the partitioner emit (no device computation).
_PLUMBING = {"aten::_to_copy", "aten::copy_", "aten::copy", "aten::clone", "aten::empty", "aten::empty_strided",
             "aten::empty_like", "aten::zeros", "aten::zeros_like", "aten::ones", "aten::ones_like",
             "aten::full", "aten::full_like", "aten::scalar_tensor", "aten::lift_fresh_copy", "aten::_unsafe_view",
             "aten::detach", "aten::alias", "aten::as_strided", "aten::view", "aten::_local_scalar_dense"}
# Runtime checks and shape constraints: no computation, so no lowering is
# needed. The compiler turns each into a check of the compiled program, as
# Inductor does (an assertion in the generated kernel for _assert_async.msg,
# a check of the symbolic sizes for _assert_scalar and sym_constrain_range),
# and the check still runs: inside a launch the op runs on the device and a
# failing assertion raises the CPU's error. The _functional_ forms (and the
# dependency token they thread) are what functionalization makes of them.
_RUNTIME_CHECKS = {"aten::_assert_async", "aten::_functional_assert_async", "aten::_assert_scalar",
                   "aten::_assert_tensor_metadata", "aten::sym_constrain_range",
                   "aten::sym_constrain_range_for_size", "aten::_functional_sym_constrain_range",
                   "aten::_functional_sym_constrain_range_for_size", "aten::_make_dep_token"}
# Op families the release marks not supported on Neuron (no lowering, whatever their tags say).
_UNSUPPORTED = ("sparse", "quantize", "aten::q_", "aten::int_repr", "mkldnn")


def op_name(op: torch._ops.OpOverload) -> tuple[str, str]:
    """(name with overload, name without), as the dispatcher spells them ("aten::add.Tensor", "aten::add")."""
    return op.name(), op._schema.name


def _directly_lowered(op: torch._ops.OpOverload, native: set[str], untracked: set[str]) -> bool:
    name, base = op_name(op)
    if any(u in name for u in _UNSUPPORTED):
        return False
    ns = base.partition("::")[0]
    functional = base[:-1] if base.endswith("_") and not base.endswith("__") else base  # add_ -> add
    if name in native or base in native or functional in native:
        return True
    if _in_core_aten(op) or ns == "prims" or base in _PLUMBING or base in untracked or base in _RUNTIME_CHECKS:
        return True
    if is_collective(op) or ns == "neuron_sim":  # neuron_sim::random (random_ops.py)
        return True
    # a custom op with a device kernel (torch.library.custom_op(device_types="neuron")) or one for every device
    return ns != "aten" and any(torch._C._dispatch_has_kernel_for_dispatch_key(name, k)
                                for k in ("PrivateUse1", "CompositeExplicitAutograd"))


@functools.cache
def _core_overloads(packet: torch._ops.OpOverloadPacket) -> bool:
    return any(torch.Tag.core in getattr(packet, o).tags for o in packet.overloads())


def _in_core_aten(op: torch._ops.OpOverload) -> bool:
    """A core ATen op, or another overload of one."""
    return torch.Tag.core in op.tags or _core_overloads(op.overloadpacket)


@functools.cache
def _core_table() -> dict:
    from torch._decomp import core_aten_decompositions
    return dict(core_aten_decompositions())


def _decomposition(op: torch._ops.OpOverload) -> Optional[Callable]:
    from torch._decomp import decomposition_table  # every registered decomposition and reference
    fn = _core_table().get(op) or decomposition_table.get(op)
    if fn is not None:
        return fn
    name, _ = op_name(op)
    if torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeImplicitAutograd"):
        return op.decompose
    return None


def _plain(a: Any) -> Any:
    """A node's (immutable) argument lists as lists a decomposition may edit."""
    if isinstance(a, dict):
        return {k: _plain(v) for k, v in a.items()}
    if isinstance(a, list):
        return [_plain(x) for x in a]
    if isinstance(a, tuple):
        return tuple(_plain(x) for x in a)
    return a


def _decomposed_ops(op: torch._ops.OpOverload, node: torch.fx.Node) -> Optional[torch.fx.GraphModule]:
    """The op's decomposition traced on the node's example values, or None."""
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.proxy_tensor import make_fx

    fn = _decomposition(op)
    if fn is None:
        return None
    missing = []
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs),
                                         lambda n: n.meta["val"] if "val" in n.meta else missing.append(n))
    if missing:
        return None
    flat, spec = torch.utils._pytree.tree_flatten((_plain(args), _plain(kwargs)))
    where = [i for i, a in enumerate(flat) if isinstance(a, torch.Tensor)]
    fake_mode = detect_fake_mode([flat[i] for i in where])

    def run(*ts: Any) -> Any:  # the op's tensors (in lists too) become the traced inputs
        full = list(flat)
        for i, t in zip(where, ts):
            full[i] = t
        a, k = torch.utils._pytree.tree_unflatten(full, spec)
        return fn(*a, **k)
    try:
        if fake_mode is None:
            return make_fx(run, decomposition_table=_core_table(), tracing_mode="fake")(*[flat[i] for i in where])
        with fake_mode:
            return make_fx(run, decomposition_table=_core_table())(*[flat[i] for i in where])
    except Exception:  # the decomposition does not apply to these arguments: no lowering through it
        return None


def _without_lowering(gm: torch.fx.GraphModule, native: set[str], untracked: set[str], depth: int) -> set[str]:
    bad: set[str] = set()
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        op = node.target
        if _directly_lowered(op, native, untracked):
            continue
        name, _ = op_name(op)
        sub = _decomposed_ops(op, node) if depth < 4 and not any(u in name for u in _UNSUPPORTED) else None
        if sub is None:
            bad.add(name)
        else:
            bad |= _without_lowering(sub, native, untracked, depth + 1)
    return bad


def ops_without_lowering(gm: torch.fx.GraphModule) -> list[str]:
    """Operator names in the graph the device compiler cannot lower, sorted
    (an op that decomposes is named by the ops of its decomposition that
    have no lowering)."""
    native = set(native_ops.current())
    untracked = set(tracking.untracked_op_names())  # view/metadata ops, "aten::view"
    return sorted(_without_lowering(gm, native, untracked, 0))


def _overload(name: str) -> Optional[torch._ops.OpOverload]:
    """The OpOverload of a dispatcher name ("aten::sort.stable", "aten::zero_"), or None."""
    ns, _, rest = name.partition("::")
    base, _, overload = rest.partition(".")
    try:
        return getattr(getattr(getattr(torch.ops, ns), base), overload or "default")
    except (AttributeError, RuntimeError):
        return None


def lowered_in_graph(name: str) -> bool:
    """Whether the device compiler lowers the op `name` met while a compiled
    graph launches: its direct lowering (a decomposition would have been
    applied when the graph was traced, not at run time)."""
    op = _overload(name)
    return op is not None and _directly_lowered(op, set(native_ops.current()), set(tracking.untracked_op_names()))


def has_collectives(gm: torch.fx.GraphModule) -> bool:
    return any(node.op == "call_function" and is_collective(node.target) for node in gm.graph.nodes)


def node_count(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "call_function")


# Every graph is checked here before it can launch: from then on, the ops its
# launches dispatch are asked about with the same set.
_C._set_graph_lowering(lowered_in_graph)
