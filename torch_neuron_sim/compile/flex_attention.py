"""The FX pass that legalizes FlexAttention for the device: each
`flex_attention` / `flex_attention_backward` higher-order op in an
AOTAutograd graph (forward, backward or inference) is replaced by the ATen
ops of its decomposition (torch_neuron_sim/flex_attention/decomposition.py),
with score_mod, its backward and mask_mod inlined - traced on the node's
example values, then copied into the graph in the op's place. Afterwards the
graph holds only ops the device compiles, so it launches as one unit with no
CPU fallback (graph_check.py would otherwise see no lowering for it)."""
from __future__ import annotations

import torch
import torch.utils._pytree as pytree

from ..flex_attention import decomposition


def _hops() -> dict:
    from torch._higher_order_ops.flex_attention import flex_attention, flex_attention_backward
    return {flex_attention: decomposition.flex_attention_forward,
            flex_attention_backward: decomposition.flex_attention_backward}


def needed(gm: torch.fx.GraphModule) -> bool:
    hops = _hops()
    return any(n.op == "call_function" and n.target in hops for n in gm.graph.nodes)


def _traced(gm: torch.fx.GraphModule, node: torch.fx.Node, fn) -> tuple[torch.fx.GraphModule, list[torch.fx.Node]]:
    """fn traced on the node's example values; and the graph nodes that feed
    the traced graph's placeholders, in order."""
    from torch._guards import detect_fake_mode
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    flat, spec = pytree.tree_flatten((node.args, node.kwargs))
    inputs = [i for i, a in enumerate(flat) if isinstance(a, torch.fx.Node) and a.op != "get_attr"]
    resolved = [getattr(gm, a.target) if isinstance(a, torch.fx.Node) and a.op == "get_attr" else a for a in flat]
    vals = [flat[i].meta["val"] for i in inputs]

    def call(*tensors):
        args = list(resolved)
        for i, t in zip(inputs, tensors):
            args[i] = t
        a, kw = pytree.tree_unflatten(args, spec)
        return fn(*a, **kw)

    fake_mode = detect_fake_mode(vals) or FakeTensorMode(allow_non_fake_inputs=True)
    with fake_mode, torch.enable_grad():
        sub = make_fx(call)(*vals)
    return sub, [flat[i] for i in inputs]


def _redirect(user: torch.fx.Node, value) -> None:
    """`user` reads part of the replaced op's result (getitem): point its users
    at the matching part of the decomposition's result."""
    import operator
    assert user.op == "call_function" and user.target is operator.getitem, user.format_node()
    part = value[user.args[1]]
    if isinstance(part, torch.fx.Node):
        user.replace_all_uses_with(part)
    else:  # a nested tuple (the captured buffers' gradients)
        for u in list(user.users):
            _redirect(u, part)


def _erase(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    for u in list(node.users):
        _erase(graph, u)
    graph.erase_node(node)


def legalize(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    hops = _hops()
    for node in list(gm.graph.nodes):
        fn = hops.get(node.target) if node.op == "call_function" else None
        if fn is None:
            continue
        sub, feeds = _traced(gm, node, fn)
        placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
        for n in sub.graph.nodes:  # constants the trace made: attributes of this graph now
            if n.op == "get_attr":
                name = f"_flex_{len(gm.graph.nodes)}_{n.target}"
                setattr(gm, name, getattr(sub, n.target))
                n.target = name
        with gm.graph.inserting_before(node):
            result = gm.graph.graph_copy(sub.graph, dict(zip(placeholders, feeds)))
        for user in list(node.users):
            _redirect(user, result)
        _erase(gm.graph, node)
    gm.graph.eliminate_dead_code()  # the score_mod/mask_mod subgraphs' get_attr nodes
    gm.graph.lint()
    gm.recompile()
    return gm
