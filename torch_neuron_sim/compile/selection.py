"""torch.compile on a Neuron device, as the release runs it:

* Backend auto-selection. torch.compile(model) without backend= (or with
  backend="inductor", which torch.compile also builds Inductor's wrapper
  for, as HF Trainer does) compiles each captured graph whose example
  inputs (inputs, parameters, buffers) include a neuron tensor with the
  neuron backend; a graph of CPU tensors stays Inductor's. Inductor has no
  neuron device, so nothing else could compile such a graph.
* Per-shape recompiles. With torch.compile's dynamic unset, Dynamo's
  automatic dynamic would retrace a frame with a symbolic size the second
  time that size changes; the neuron backend only compiles static shapes,
  so for it automatic dynamic is off: each new shape is a new static graph
  (dynamic=False's behaviour). With backend="neuron" that holds for the
  whole frame; auto-selected, for neuron tensors. dynamic=True and
  torch._dynamo.mark_dynamic still make sizes symbolic, which the backend
  refuses (static_shapes.py). Dynamo's recompile_limit (default 8 per
  frame) still applies: past it Dynamo warns and runs the frame eagerly,
  op by op on the device (with fullgraph=True, or
  torch._dynamo.config.fail_on_recompile_limit_hit, it raises).

Installed when the package loads; Dynamo itself is imported only once a
compiled function first runs."""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

import torch

_state = threading.local()  # .auto: an auto-selecting frame is being run (its graphs may go to neuron)


def _on_neuron(example_inputs: list[Any]) -> bool:
    return any(isinstance(x, torch.Tensor) and x.device.type == "neuron" for x in example_inputs)


@contextlib.contextmanager
def _auto_frame() -> Iterator[None]:
    _patch_automatic_dynamic()
    before = getattr(_state, "auto", 0)
    _state.auto = before + 1
    try:
        yield
    finally:
        _state.auto = before


_patched = False


def _patch_automatic_dynamic() -> None:
    """Dynamo's per-tensor dynamism decision, with automatic dynamic off for
    neuron tensors while an auto-selecting frame compiles."""
    global _patched
    if _patched:
        return
    import torch._dynamo
    from torch._dynamo.variables import builder
    decide = builder._automatic_dynamic

    def _automatic_dynamic(e, tx, source, static_shapes, *args, **kwargs):
        if getattr(_state, "auto", 0) and isinstance(e, torch.Tensor) and e.device.type == "neuron":
            with torch._dynamo.config.patch(automatic_dynamic_shapes=False):
                return decide(e, tx, source, static_shapes, *args, **kwargs)
        return decide(e, tx, source, static_shapes, *args, **kwargs)

    builder._automatic_dynamic = _automatic_dynamic
    _patched = True


def install() -> None:
    inductor = torch._TorchCompileInductorWrapper
    if getattr(inductor, "_neuron_selects", False):
        return
    compile_with_inductor = inductor.__call__

    def __call__(self, model_, inputs_, *args, **kwargs):
        if _on_neuron(inputs_):
            from .backend import neuron_backend
            return neuron_backend(model_, inputs_)
        return compile_with_inductor(self, model_, inputs_, *args, **kwargs)

    inductor.__call__ = __call__
    inductor._neuron_selects = True
    # Dynamo reads backend_ctx_ctor from the wrapper's own attributes (its
    # debug wrapper copies the instance __dict__, not class attributes).
    init_inductor = inductor.__init__

    def init_selecting(self, *args, **kwargs):
        init_inductor(self, *args, **kwargs)
        self.backend_ctx_ctor = _auto_frame

    inductor.__init__ = init_selecting

    # torch.compile(backend=<name>) wraps the backend in _TorchCompileWrapper,
    # which does not pass on the backend's own context: forward it.
    wrapper = torch._TorchCompileWrapper
    init_wrapper = wrapper.__init__

    def init_forwarding(self, *args, **kwargs):
        init_wrapper(self, *args, **kwargs)
        ctx = getattr(self.compiler_fn, "backend_ctx_ctor", None)
        if ctx is not None:
            self.backend_ctx_ctor = ctx

    wrapper.__init__ = init_forwarding
