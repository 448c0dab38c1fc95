"""Random ops in a compiled graph: the FX pass that makes them draw from the
device's generator, as native random ops do.

AOTAutograd leaves a graph's random ops as ATen ops without a generator
(dropout decomposes into rand and a comparison, as for any backend), and
Inductor would lower those with its own seeds. The pass replaces each by
`neuron_sim::random`, whose kernel takes the device's next numbers through
torch_neuron_sim.devices.random.host_generator(device) (a CPU generator seeded
from the device generator's (seed, offset), the offset advanced as for one
native random op), so compiled graphs and eager ops share the device stream
and torch.manual_seed / torch.neuron.manual_seed make both reproducible.
Inductor keeps the op as an extern call; its tag nondeterministic_seeded
keeps two equal draws from being merged into one."""
from __future__ import annotations

from typing import Optional

import torch

aten = torch.ops.aten
_lib = torch.library.Library("neuron_sim", "FRAGMENT")
_lib.define("random(str kind, SymInt[] size, float a, float b, ScalarType dtype, Device device, Tensor? like) -> Tensor",
            tags=(torch.Tag.nondeterministic_seeded,))


def _draw(kind: str, size: list[int], a: float, b: float, dtype: torch.dtype, device: torch.device,
          like: Optional[torch.Tensor]) -> torch.Tensor:
    from ..devices.random import host_generator
    g = host_generator(device) if device.type == "neuron" else None
    if kind == "rand":
        out = torch.rand(size, generator=g, dtype=dtype)
    elif kind == "randn":
        out = torch.randn(size, generator=g, dtype=dtype)
    elif kind == "randint":
        out = torch.randint(int(a), int(b), size, generator=g, dtype=dtype)
    elif kind == "randperm":
        out = torch.randperm(int(a), generator=g, dtype=dtype)
    elif kind == "bernoulli_p":
        out = torch.empty(size, dtype=dtype).bernoulli_(a, generator=g)
    elif kind == "bernoulli":
        out = torch.bernoulli(like.cpu(), generator=g)
    else:
        raise ValueError(f"neuron_sim::random: unknown kind {kind!r}")
    return out.to(device)


def _fake(kind, size, a, b, dtype, device, like):
    if kind == "randperm":
        size = [int(a)]
    return torch.empty(size, dtype=dtype, device=device)


_lib.impl("random", _draw, "CompositeExplicitAutograd")
torch.library.register_fake("neuron_sim::random", _fake, lib=_lib)
RANDOM = torch.ops.neuron_sim.random.default


def _factory(node: torch.fx.Node, kind: str, size, a: float = 0.0, b: float = 0.0) -> tuple:
    val = node.meta["val"]
    return (kind, list(size), float(a), float(b), val.dtype, val.device, None)


def _rewrite(node: torch.fx.Node) -> Optional[tuple]:
    """neuron_sim::random's arguments standing for a random node, or None."""
    t, args = node.target, node.args
    if t in (aten.rand.default, aten.randn.default):
        return _factory(node, "rand" if t is aten.rand.default else "randn", args[0])
    if t in (aten.rand_like.default, aten.randn_like.default):
        return _factory(node, "rand" if t is aten.rand_like.default else "randn", node.meta["val"].shape)
    if t is aten.randint.low:
        return _factory(node, "randint", args[2], args[0], args[1])
    if t is aten.randint.default:
        return _factory(node, "randint", args[1], 0, args[0])
    if t is aten.randperm.default:
        return _factory(node, "randperm", [], args[0])
    if t is aten.bernoulli.p and "generator" not in node.kwargs:
        p = args[1] if len(args) > 1 else node.kwargs.get("p", 0.5)
        return _factory(node, "bernoulli_p", node.meta["val"].shape, p)
    if t is aten.bernoulli.default and "generator" not in node.kwargs:
        val = node.meta["val"]
        return ("bernoulli", list(val.shape), 0.0, 0.0, val.dtype, val.device, args[0])
    return None


def needed(gm: torch.fx.GraphModule) -> bool:
    return any(n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
               and torch.Tag.nondeterministic_seeded in n.target.tags and n.target is not RANDOM
               for n in gm.graph.nodes)


def draw_from_device(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Rewrites the graph's random ops in place (ops not listed keep their
    ATen form: native_dropout is a native op and draws as eager does)."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        new_args = _rewrite(node)
        if new_args is None:
            continue
        with gm.graph.inserting_before(node):
            repl = gm.graph.call_function(RANDOM, new_args)
        repl.meta = dict(node.meta)
        node.replace_all_uses_with(repl)
        gm.graph.erase_node(node)
        changed = True
    if changed:
        gm.graph.lint()
        gm.recompile()
    return gm
