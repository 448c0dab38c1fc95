"""torch.compile(model, backend="neuron", mode=..., options={...}).

Options the real backend reads: "model_name" (the prefix of each graph_name
in the dynamo metrics; default "model_default"). The emulator adds
"executor": "inductor" (default: Inductor's C++ code generation on arena
memory) or "graph" (the AOTAutograd graph run op by op on the device, with
full op tracking); NEURON_SIM_COMPILE_EXECUTOR sets the default, which is
"graph" while stochastic rounding or --auto-cast all is on (docs/numerics.md).
Only mode "default" exists on the device: any other mode warns and is
ignored. Unknown options warn and are ignored."""
from __future__ import annotations

import dataclasses
import os
import warnings
from typing import Any, Optional

from ..execution import numerics

EXECUTORS = ("inductor", "graph")
_KNOWN = {"model_name", "executor", "dynamic"}


@dataclasses.dataclass(frozen=True)
class Options:
    model_name: str = "model_default"
    executor: str = "inductor"


def default_executor() -> str:
    """Inductor, unless the device's numerics round every op's result
    (stochastic rounding, --auto-cast all: docs/numerics.md): then the graph
    runs op by op, each result rounded as the device rounds it (Inductor's fused
    kernels would round as the CPU does). Reading the switches raises the
    compiler's error for a malformed NEURON_CC_FLAGS, as a compilation would."""
    active = numerics.numerics()
    return "graph" if active["stochastic_rounding"] or active["auto_cast"] == "all" else "inductor"


def resolve(mode: Optional[str], options: Optional[dict[str, Any]]) -> Options:
    if mode not in (None, "default"):
        warnings.warn(f"torch.compile(backend='neuron'): mode '{mode}' is not supported and is ignored; "
                      "the neuron backend always compiles in mode 'default'", UserWarning, stacklevel=3)
    options = dict(options or {})
    unknown = sorted(set(options) - _KNOWN)
    if unknown:
        warnings.warn(f"torch.compile(backend='neuron'): unknown option(s) {unknown} ignored", UserWarning,
                      stacklevel=3)
    executor = str(options.get("executor") or os.environ.get("NEURON_SIM_COMPILE_EXECUTOR", "").strip()
                   or default_executor())
    if executor not in EXECUTORS:
        raise ValueError(f"torch.compile(backend='neuron'): executor '{executor}' is not one of {EXECUTORS}")
    return Options(model_name=str(options.get("model_name") or "model_default"), executor=executor)
