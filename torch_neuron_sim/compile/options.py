"""torch.compile(model, backend="neuron", mode=..., options={...}).

Options the real backend reads: "model_name" (the prefix of each graph_name
in the dynamo metrics; default "model_default"). The emulator adds
"executor": "inductor" (default: Inductor's C++ code generation on arena
memory) or "graph" (the AOTAutograd graph run op by op on the device, with
full op tracking); NEURON_SIM_COMPILE_EXECUTOR sets the default.
Only mode "default" exists on the device: any other mode warns and is
ignored. Unknown options warn and are ignored."""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Optional
from .. import environment

EXECUTORS = ("inductor", "graph")
_KNOWN = {"model_name", "executor", "dynamic"}


@dataclasses.dataclass(frozen=True)
class Options:
    model_name: str = "model_default"
    executor: str = "inductor"


def resolve(mode: Optional[str], options: Optional[dict[str, Any]]) -> Options:
    if mode not in (None, "default"):
        warnings.warn(f"torch.compile(backend='neuron'): mode '{mode}' is not supported and is ignored; "
                      "the neuron backend always compiles in mode 'default'", UserWarning, stacklevel=3)
    options = dict(options or {})
    unknown = sorted(set(options) - _KNOWN)
    if unknown:
        warnings.warn(f"torch.compile(backend='neuron'): unknown option(s) {unknown} ignored", UserWarning,
                      stacklevel=3)
    executor = str(options.get("executor") or environment.setting("NEURON_SIM_COMPILE_EXECUTOR")
                   or "inductor")
    if executor not in EXECUTORS:
        raise ValueError(f"torch.compile(backend='neuron'): executor '{executor}' is not one of {EXECUTORS}")
    return Options(model_name=str(options.get("model_name") or "model_default"), executor=executor)
