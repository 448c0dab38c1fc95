"""Static shapes: a NEFF is compiled for fixed tensor shapes, so the real
backend refuses a graph with any symbolic dimension, however it arose
(torch.compile(dynamic=True), torch._dynamo.mark_dynamic, or Dynamo's
automatic dynamic after a second shape), with this RuntimeError. With
dynamic=False every new shape is a new static graph: a recompile."""
from __future__ import annotations

from typing import Any, Optional

import torch


def _shape_env(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Optional[Any]:
    for node in gm.graph.nodes:
        for key in ("example_value", "val"):
            v = node.meta.get(key)
            mode = getattr(v, "fake_mode", None)
            if mode is not None and getattr(mode, "shape_env", None) is not None:
                return mode.shape_env
    for x in example_inputs:
        if isinstance(x, torch.SymInt):
            return x.node.shape_env
    return None


def symbols(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> list[str]:
    """The symbolic dimensions the graph was traced with (s0, s77, ...)."""
    env = _shape_env(gm, example_inputs)
    found = set()
    if env is not None:
        values = env.backed_var_to_val if hasattr(env, "backed_var_to_val") else env.var_to_val
        found |= {str(s) for s in set(values) | set(env.var_to_range)}
    for x in example_inputs:  # a SymInt input may come from another shape env
        if isinstance(x, torch.SymInt):
            found |= {str(s) for s in x.node.expr.free_symbols}
    return sorted(found, key=lambda s: (len(s), s))


def no_automatic_dynamic() -> Any:
    """The context each call of a backend="neuron" function runs Dynamo in:
    no automatic dynamic, so a new shape is a new static graph
    (selection.py)."""
    import torch._dynamo
    return torch._dynamo.config.patch(automatic_dynamic_shapes=False)


def check(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> None:
    syms = symbols(gm, example_inputs)
    if not syms:
        return
    where = next((n.meta["stack_trace"] for n in gm.graph.nodes if n.meta.get("stack_trace")), None)
    msg = ("\n\nDynamic shapes detected in the model, but torch-neuronx requires static shapes. "
           f"Found {len(syms)} dynamic dimension(s): [{', '.join(syms[:3])}{', ...' if len(syms) > 3 else ''}]")
    if where:
        msg += f"\nSource location: {where.strip()}"
    msg += ("\nTo fix this issue:"
            "\n1. Ensure all input tensors have fixed, known shapes"
            " (pass dynamic=False to torch.compile: each new shape then compiles its own graph)"
            "\n2. Avoid operations that create dynamic shapes (e.g., dynamic slicing, variable-length sequences)"
            " and torch._dynamo.mark_dynamic"
            "\nFor more information, see: https://pytorch.org/docs/stable/export.html#dynamic-shapes")
    raise RuntimeError(msg)
