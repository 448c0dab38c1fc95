"""torch.compile(model, backend="neuron", mode=..., options={...}).

Options the real backend reads: "model_name" (the prefix of each graph_name
in the dynamo metrics; default "model_default") and "fallback_execution"
(a bool: whether a graph that fails to compile runs eagerly; it overrides
TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION, whose default 1 makes such a graph
an error). The emulator adds "executor": "inductor" (default: Inductor's C++
code generation on arena memory) or "graph" (the AOTAutograd graph run op
by op on the device, with full op tracking); NEURON_SIM_COMPILE_EXECUTOR
sets the default.
Only mode "default" exists on the device: any other mode warns and is
ignored. Unknown options warn, naming them, and are ignored."""
from __future__ import annotations

import dataclasses
import os
import warnings
from typing import Any, Optional

EXECUTORS = ("inductor", "graph")
_KNOWN = {"model_name", "executor", "dynamic", "fallback_execution"}
FALLBACK_ENV = "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"
_FALSE = ("0", "false", "no", "off")


@dataclasses.dataclass(frozen=True)
class Options:
    model_name: str = "model_default"
    executor: str = "inductor"
    fallback_execution: Optional[bool] = None  # None: TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION decides

    def fallback_allowed(self) -> bool:
        """Whether a graph that fails to compile runs eagerly: the option if
        given, else the environment (read now; unset or 1 means raise)."""
        if self.fallback_execution is not None:
            return self.fallback_execution
        return os.environ.get(FALLBACK_ENV, "1").strip().lower() in _FALSE


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
                   or "inductor")
    if executor not in EXECUTORS:
        raise ValueError(f"torch.compile(backend='neuron'): executor '{executor}' is not one of {EXECUTORS}")
    fallback = options.get("fallback_execution")
    if fallback is not None and not isinstance(fallback, bool):
        raise TypeError(f"torch.compile(backend='neuron'): option 'fallback_execution' must be True or False, "
                        f"got {fallback!r} ({type(fallback).__name__})")
    return Options(model_name=str(options.get("model_name") or "model_default"), executor=executor,
                   fallback_execution=fallback)
