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


def retain_device_mode() -> bool:
    """TORCH_NEURONX_RETAIN_DEVICE_MODE=1: a graph's outputs take its inputs'
    placement (a graph of host tensors returns host tensors); otherwise
    they are neuron tensors."""
    return environment.flag("TORCH_NEURONX_RETAIN_DEVICE_MODE")


# Which inputs of a forward graph were host tensors, by AOTAutograd graph id:
# its backward returns those inputs' gradients on the host, where autograd
# expects them (a gradient must be on its tensor's device).
_host_inputs: dict[str, list[bool]] = {}


def inductor(gm: torch.fx.GraphModule, example_inputs: list[Any], kind: str, decompose: bool = False) -> Callable:
    """Inductor's CPU code generation for the neuron device (boxed callable).
    AOTAutograd traced the graph with Inductor's decompositions
    (backend.py), as it does for a CPU graph; a graph an FX pass added ATen
    ops to (FlexAttention's) is decomposed again (`decompose`)."""
    from torch._inductor.compile_fx import compile_fx_inner

    from . import inductor_device
    inductor_device.register()
    if decompose:
        from torch._guards import detect_fake_mode
        from torch.fx.experimental.proxy_tensor import make_fx

        with detect_fake_mode(example_inputs):
            gm = make_fx(gm, decomposition_table=inductor_device.inductor_decompositions())(*example_inputs)
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


def _keeping_layout(x: torch.Tensor, convert: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """convert(x) elementwise, with x's sizes and strides: the compiled code
    asserts the layout it was compiled for, an expanded (stride-0) input's
    included, which a plain copy would make contiguous."""
    y = convert(x)
    if y is x or y.stride() == x.stride():
        return y
    flat = torch.empty(0, dtype=x.dtype, device=x.device).set_(x.untyped_storage())
    return convert(flat).as_strided(x.size(), x.stride(), x.storage_offset())


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
                 narrow: dict, unit: bool = True, work: Optional[int] = None, kind: str = "inference",
                 aot_id: str = ""):
        self._boxed_call = True  # an instance attribute: Dynamo's disable() wrapper copies __dict__
        self.fn = fn
        self.kind = kind
        self.aot_id = aot_id  # forward and backward of one AOTAutograd graph share it
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
        if self.kind == "backward" and _host_inputs and self.aot_id in _host_inputs:
            return self._gradients_to_host(outs)
        return outs

    def _gradients_to_host(self, outs: list) -> list:
        on_host = _host_inputs[self.aot_id]
        if len(on_host) != len(outs):
            return outs
        cpu = torch.device("cpu")
        return [o.to(cpu) if h and isinstance(o, torch.Tensor) else o for o, h in zip(outs, on_host)]

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
                        f"Input tensor at index {i} is on {x.device.type} device, but the compiled graph runs on "
                        f"{device}: copy it to the device first (CPU inputs are copied automatically unless "
                        f"TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY=1)")
                host = True
            elif x.device != device:
                raise RuntimeError(f"Compiled graph input {i} is on {x.device}, but the graph was compiled for "
                                   f"{device}")
            else:
                on_device = True
            y = _keeping_layout(x, lambda t: retarget.input_on_device(t, device, self.narrow))
            if y.dtype in self.wide_int:  # int64 holds int32 values on the device
                y = _keeping_layout(y, lambda t: t.to(torch.int32).to(t.dtype))
            if y is not x:
                subst[i] = (x, y)
        call_args = list(args)
        args_in = list(args) if self.kind == "forward" and host else ()
        for i, (_, y) in subst.items():
            call_args[i] = y
        args.clear()
        outs = self._run(call_args)
        for i in self.mutated:
            if i in subst:
                x, y = subst[i]
                x.copy_(y)
        self.on_launch()
        cpu = torch.device("cpu")
        if self.kind == "forward" and host:
            _host_inputs[self.aot_id] = [isinstance(x, torch.Tensor) and x.device.type == "cpu" for x in args_in]
        if self.kind == "backward" and self.aot_id in _host_inputs:
            outs = self._gradients_to_host(outs)
        elif host and not on_device and retain_device_mode():  # a graph of host tensors: results to the host
            outs = [o.to(cpu) if isinstance(o, torch.Tensor) and o.device == device else o for o in outs]
        return outs
