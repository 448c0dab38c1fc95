"""The Dynamo backend "neuron", registered through the package's entry point
(pyproject.toml: torch_dynamo_backends: neuron = this module's
neuron_backend) — the real backend's only registration mechanism, so a
second register_backend("neuron") fails with Dynamo's "duplicate name".

Dynamo hands over one FX graph per captured region (graph breaks split a
function into several) with real example inputs. The backend:
  1. resolves mode/options (options.py),
  2. refuses symbolic shapes (static_shapes.py),
  3. runs AOTAutograd: the joint graph is functionalized, decomposed as far
     as the device needs (native ops stay whole), and partitioned into a
     forward and a backward graph; each is compiled once (compiler.py) and
     launched as one unit (executors.py)."""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import torch

from . import static_shapes
from .options import resolve


def decompositions() -> dict:
    """For the op-by-op executor: Inductor's decomposition table minus the ops
    the device runs natively, so composite ops the device lacks decompose into
    ops it may have and native ops run whole."""
    from torch._inductor.decomposition import select_decomp_table

    from .graph_check import op_name
    from ..execution import native_ops
    native = set(native_ops.current())
    out = {}
    for op, fn in select_decomp_table().items():
        if isinstance(op, torch._ops.OpOverload):
            name, base = op_name(op)
            if name in native or base in native:
                continue
        out[op] = fn
    return out


def _sdpa_math(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    return torch.ops.aten._scaled_dot_product_attention_math(query, key, value, attn_mask, dropout_p, is_causal,
                                                             scale=scale, enable_gqa=enable_gqa)[0]


def decompose_attention(gm: torch.fx.GraphModule) -> None:
    """Attention in a compiled graph takes the decomposed path (matmuls and a
    softmax the compiler fuses), as the real backend's MLIR lowering does; the
    fused kernel stays the eager path. Rewritten in Dynamo's graph, before
    AOTAutograd picks the fused kernel for the device."""
    sdpa = {torch._C._nn.scaled_dot_product_attention, torch.nn.functional.scaled_dot_product_attention}
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in sdpa:
            node.target = _sdpa_math
            changed = True
    if changed:
        gm.recompile()


def neuron_backend(gm: torch.fx.GraphModule, example_inputs: list[Any], mode: Optional[str] = None,
                   options: Optional[dict[str, Any]] = None) -> Callable:
    from torch._dynamo.backends.common import aot_autograd

    from .compiler import compile_graph

    opts = resolve(mode, options)
    static_shapes.check(gm, example_inputs)
    decompose_attention(gm)
    # No donated buffers: the device keeps linear whole, so a tensor both
    # relu's result and the next linear's input is saved for backward twice,
    # and Inductor reused one saved input in place for relu's gradient while
    # the other, the same memory, was still to be read for the weight's.
    with torch._functorch.config.patch(donated_buffer=False):
        return _aot(gm, example_inputs, opts)


# Each call of a function compiled with backend="neuron" runs Dynamo without
# automatic dynamic: a new shape is a new static graph (selection.py).
neuron_backend.backend_ctx_ctor = static_shapes.no_automatic_dynamic


def _aot(gm: torch.fx.GraphModule, example_inputs: list[Any], opts: Any) -> Callable:
    from torch._dynamo.backends.common import aot_autograd

    from . import inductor_device
    from .compiler import compile_graph

    return aot_autograd(
        fw_compiler=functools.partial(compile_graph, kind="forward", opts=opts),
        bw_compiler=functools.partial(compile_graph, kind="backward", opts=opts),
        inference_compiler=functools.partial(compile_graph, kind="inference", opts=opts),
        decompositions=(_decompositions_now() if opts.executor == "graph"
                        else inductor_device.inductor_decompositions()),
        keep_inference_input_mutations=True,
    )(gm, example_inputs)


def _decompositions_now() -> dict:
    # The native-op table can change at run time (native_ops.extend/load).
    from ..execution import native_ops
    return _decomp_for(native_ops.version())


@functools.lru_cache(maxsize=4)
def _decomp_for(version: str) -> dict:
    return decompositions()
