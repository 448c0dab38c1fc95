"""The FX pass that puts a graph on the device before it compiles, as the
real backend's dtype-conversion pass does (it rewrites the graph, then
torch-mlir lowers it):
  * 64-bit floats compute in 32 bits: float64 graph inputs are given to the
    graph as float32, float64 constants and dtype= arguments become float32,
    and each output is cast back to the dtype the program expects;
  * a graph traced on the CPU (a CPU model, or CPU inputs) runs on the
    device: its inputs are copied in at launch (executors.py) and device=
    arguments naming the CPU name the device instead.
int64 inputs keep their dtype (CPU index kernels need int64) and are wrapped
through int32 at launch, which gives int32 arithmetic's numbers.
Under NEURON_SIM_DTYPE_POLICY=exact neither narrowing happens, as in eager
mode; a graph keeps the policy it was compiled under (`narrowing()`).
The rewrite re-traces the graph (make_fx) under the graph's fake mode, so
every node's metadata stays consistent for the compilers that follow."""
from __future__ import annotations

from typing import Any, Optional

import torch
import torch.fx

from ..execution.dtype_policy import NARROWED

# The 64-bit rule's floating dtypes (execution/dtype_policy.py): integers keep theirs (CPU
# index kernels need int64) and are wrapped through int32 at launch instead.
NARROW = {wide: narrow for wide, narrow in NARROWED.items() if wide.is_floating_point}


def narrowing() -> dict[torch.dtype, torch.dtype]:
    """The dtypes a graph compiled now narrows: none under the exact policy."""
    from ..execution.dtype_policy import get_dtype_policy
    return NARROW if get_dtype_policy() == "trainium" else {}


def _is_cpu(d: Any) -> bool:
    return (isinstance(d, torch.device) and d.type == "cpu") or (isinstance(d, str) and d == "cpu")


def needed(gm: torch.fx.GraphModule, example_inputs: list[Any], device: torch.device,
           narrow: dict[torch.dtype, torch.dtype]) -> bool:
    for x in example_inputs:
        if isinstance(x, torch.Tensor) and (x.device != device or x.dtype in narrow):
            return True
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            t = getattr(gm, node.target, None)
            if isinstance(t, torch.Tensor) and (t.dtype in narrow or t.device != device):
                return True
        elif node.op == "call_function":
            for a in (*node.args, *node.kwargs.values()):
                if (isinstance(a, torch.dtype) and a in narrow) or _is_cpu(a):
                    return True
    return False


def _map(a: Any, device: torch.device, narrow: dict[torch.dtype, torch.dtype]) -> Any:
    if isinstance(a, torch.dtype):
        return narrow.get(a, a)
    if _is_cpu(a):
        return device
    if isinstance(a, (list, tuple)):
        return type(a)(_map(x, device, narrow) for x in a)
    return a


def input_on_device(x: Any, device: torch.device, narrow: dict[torch.dtype, torch.dtype]) -> Any:
    """What the rewritten graph takes in place of input x (fake or real)."""
    if not isinstance(x, torch.Tensor):
        return x
    dtype = narrow.get(x.dtype, x.dtype)
    if x.device == device and dtype == x.dtype:
        return x
    return x.to(device=device, dtype=dtype)


def rewrite(gm: torch.fx.GraphModule, example_inputs: list[Any], device: torch.device,
            narrow: dict[torch.dtype, torch.dtype]) -> torch.fx.GraphModule:
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.proxy_tensor import make_fx

    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    declared = [getattr(v, "dtype", None) for v in
                (a.meta.get("val") if isinstance(a, torch.fx.Node) else None for a in out_node.args[0])]

    class OnDevice(torch.fx.Interpreter):
        def call_function(self, target, args, kwargs):
            return super().call_function(target, _map(args, device, narrow),
                                         {k: _map(v, device, narrow) for k, v in kwargs.items()})

        def get_attr(self, target, args, kwargs):
            t = super().get_attr(target, args, kwargs)
            return input_on_device(t, device, narrow) if isinstance(t, torch.Tensor) else t

        def output(self, target, args, kwargs):
            outs = list(args[0])
            for i, (o, dt) in enumerate(zip(outs, declared)):
                if isinstance(o, torch.Tensor) and dt is not None and o.dtype != dt:
                    outs[i] = o.to(dt)
            return outs

    fake_mode = detect_fake_mode(example_inputs)
    with fake_mode if fake_mode is not None else torch.no_grad():
        inputs = [input_on_device(x, device, narrow) for x in example_inputs]
        return make_fx(lambda *a: OnDevice(gm).run(*a))(*inputs)
