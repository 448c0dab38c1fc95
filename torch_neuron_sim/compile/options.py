"""torch.compile(model, backend="neuron", mode=..., options={...}).

Options the real backend reads: "model_name" (the prefix of each graph_name
in the dynamo metrics; default "model_default") and "fallback_execution"
(a bool: whether a graph that fails to compile runs eagerly; it overrides
TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION, whose default 1 makes such a graph
an error). The emulator adds "executor": "inductor" (default: Inductor's C++
code generation on arena memory) or "graph" (the AOTAutograd graph run op
by op on the device, with full op tracking); NEURON_SIM_COMPILE_EXECUTOR
sets the default, which is "graph" while stochastic rounding or --auto-cast
all is on (docs/numerics.md).
Only mode "default" exists on the device: any other mode warns and is
ignored. Unknown options warn, naming them, and are ignored."""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Optional
from .. import environment

from ..execution import numerics

EXECUTORS = ("inductor", "graph")
_KNOWN = {"model_name", "executor", "dynamic", "fallback_execution"}
FALLBACK_ENV = "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"


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
        return not environment.flag(FALLBACK_ENV, True)


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
    executor = str(options.get("executor") or environment.setting("NEURON_SIM_COMPILE_EXECUTOR")
                   or default_executor())
    if executor not in EXECUTORS:
        raise ValueError(f"torch.compile(backend='neuron'): executor '{executor}' is not one of {EXECUTORS}")
    fallback = options.get("fallback_execution")
    if fallback is not None and not isinstance(fallback, bool):
        raise TypeError(f"torch.compile(backend='neuron'): option 'fallback_execution' must be True or False, "
                        f"got {fallback!r} ({type(fallback).__name__})")
    return Options(model_name=str(options.get("model_name") or "model_default"), executor=executor,
                   fallback_execution=fallback)
