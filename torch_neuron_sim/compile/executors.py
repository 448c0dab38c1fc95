"""Running a compiled graph: one launch per call, on the graph's device.

Two executors produce the callable:
  * inductor: Inductor's C++ code generation on arena memory (fused loops
    write straight into device memory; mm/addmm and custom ops stay extern
    calls to the device's native path) — what compile gains on a device;
  * graph: the AOTAutograd graph run op by op on the device, each op through
    the dispatcher with full op tracking (also what a graph that failed to
    compile runs as: the graph-level fallback).
The Launch wrapper around either does what the device runtime does around a
NEFF: CPU inputs are copied in (TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY=1
makes them an error), 64-bit inputs are narrowed, the graph runs under a
device guard for its own device (Inductor's code names no device index),
inputs the graph mutates are written back, outputs go back to the inputs'
device, and the launch is counted. While the profiler records, a launch of
a compiled unit is one device event costed from the graph's kernels."""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from .. import _C
from .. import environment
from ..execution.dtype_policy import WIDE_INT
from . import retarget



def autocopy_disabled() -> bool:
    return environment.flag("TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY")


def inductor(gm: torch.fx.GraphModule, example_inputs: list[Any], kind: str) -> Callable:
    """Inductor's CPU code generation for the neuron device (boxed callable)."""
    from torch._guards import detect_fake_mode
    from torch._inductor.compile_fx import compile_fx_inner
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    from . import inductor_device
    inductor_device.register()
    # The graph was decomposed only as far as the device needs (native ops
    # kept whole); Inductor lowers its own, finer decomposition, and the
    # device's ops it has no lowering for as their definition.
    fake_mode = detect_fake_mode(example_inputs)
    with fake_mode:
        gm = make_fx(gm, decomposition_table={**select_decomp_table(), **inductor_device.decompositions()})(
            *example_inputs)
    return compile_fx_inner(gm, example_inputs, is_backward=kind == "backward", is_inference=kind == "inference")


def graph(gm: torch.fx.GraphModule, example_inputs: list[Any], kind: str) -> Callable:
    """The graph itself, run op by op on the device."""
    # The graph was traced with the strides of meta kernels; an eager kernel
    # may lay its output out differently (both are valid), so a traced view
    # becomes a reshape (a view where the strides allow it, else a copy).
    # The graph is functional: no caller relies on those aliases.
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten.view.default:
            node.target = torch.ops.aten.reshape.default
            changed = True
    if changed:
        gm.recompile()

    def run(args: list) -> Any:
        return gm(*args)
    run._boxed_call = True
    return run


def mutated_inputs(gm: torch.fx.GraphModule) -> list[int]:
    """Positions of the inputs the graph writes (copy_ into a placeholder)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    pos = {n: i for i, n in enumerate(placeholders)}
    out = set()
    for n in gm.graph.nodes:
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable:
            for a, arg in zip(n.args, n.target._schema.arguments):
                if arg.is_write and isinstance(a, torch.fx.Node) and a in pos:
                    out.add(pos[a])
    return sorted(out)


class Launch:
    """The callable AOTAutograd gets for one compiled graph (boxed: takes the
    argument list)."""
    _boxed_call = True

    def __init__(self, fn: Callable, device: torch.device, mutated: list[int], on_launch: Callable[[], None],
                 narrow: dict, unit: bool = True, work: Optional[int] = None):
        self._boxed_call = True  # an instance attribute: Dynamo's disable() wrapper copies __dict__
        self.fn = fn
        self.unit = unit  # a compiled unit: its ops note no eager compilations (not so a fallback graph)
        self.device = device
        self.mutated = mutated
        self.on_launch = on_launch
        self.index = device.index if device.index is not None else 0
        self.work = -1 if work is None else work  # the graph's kernels on the device timeline (profiler.register_graph)
        # the 64-bit rule the graph was compiled under (none under the exact policy)
        self.narrow = narrow
        self.wide_int = WIDE_INT if self.narrow else ()

    def __call__(self, args: list) -> Any:
        # Common case first: every tensor input already on the graph's device
        # and none 64-bit-integer, so nothing is copied, narrowed or written
        # back. One test in C++ for all inputs: in Python, even a torch.device
        # comparison per input costs a few tenths of a microsecond each, the
        # general path below several microseconds per input (x.device.type
        # builds a string for a PrivateUse1 device), and a backward graph has
        # tens of inputs.
        if not _C._launch_inputs_on_device(args, self.index):
            return self._call_general(args)
        call_args = list(args)
        args.clear()  # as Inductor does: the graph owns its inputs (frees activations early)
        outs = self._run(call_args)
        self.on_launch()
        return outs

    def _run(self, call_args: list) -> Any:
        """One launch under a device guard for the graph's device (Inductor's
        code names no device index), counted as a compiled unit's launch, and
        one device event while the profiler records: one call into C++."""
        return _C._launch_graph(self.fn, call_args, self.index, self.unit, self.work)

    def _call_general(self, args: list) -> Any:
        """Inputs on the host, on another device, or 64-bit integers."""
        device = self.device
        subst: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        on_device = host = False
        for i, x in enumerate(args):
            if not isinstance(x, torch.Tensor):
                continue
            if x.device.type != device.type:
                if autocopy_disabled():
                    raise RuntimeError(
                        f"Compiled graph input {i} is on {x.device}, but the graph runs on {device}: copy it to "
                        f"the device first (CPU inputs are copied automatically unless "
                        f"TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY is set)")
                host = True
            elif x.device != device:
                raise RuntimeError(f"Compiled graph input {i} is on {x.device}, but the graph was compiled for "
                                   f"{device}")
            else:
                on_device = True
            y = retarget.input_on_device(x, device, self.narrow)
            if y.dtype in self.wide_int:  # int64 holds int32 values on the device
                y = y.to(torch.int32).to(y.dtype)
            if y is not x:
                subst[i] = (x, y)
        call_args = list(args)
        for i, (_, y) in subst.items():
            call_args[i] = y
        args.clear()
        outs = self._run(call_args)
        for i in self.mutated:
            if i in subst:
                x, y = subst[i]
                x.copy_(y)
        self.on_launch()
        if host and not on_device:  # a graph of host tensors: results go back to the host
            cpu = torch.device("cpu")
            outs = [o.to(cpu) if isinstance(o, torch.Tensor) and o.device == device else o for o in outs]
        return outs
