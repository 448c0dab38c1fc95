"""The environment: the variables TorchNeuron's release build sets when it is
imported, and the one reader every module reads a variable through.

A flag is true when its value, spaces trimmed and in any case, is 1, true, yes
or on; unset or empty gives the flag's default; any other value is false. The
rule lives in C++ (csrc/runtime/environment.h), where the extension's own
switches read it too, and `flag` asks it, so both sides agree on every spelling.
The variables of the Neuron runtime itself (NEURON_RT_*) keep the runtime's
reading (NEURON_RT_ENABLE_HOST_CC: exactly "1").

The release build's variables:

`import torch_neuronx` fills in these variables unless the user set them
(os.environ.setdefault), so code and tests that read them see these values
on the device; importing the emulator does the same. What they mean here:
NEURON_LAUNCH_BLOCKING=1 is how the emulator runs (every op completes at
launch); TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=0 lets a failing
native op fall back to the CPU (1: the device's error instead);
TORCH_NEURONX_MLIR_ATEN_OPS=1 is the native-op set the emulator models (its
ops run on the device and are recorded under the names the device gives them,
e.g. `clamp` with tensor bounds as "aten::clamp.Tensor", `eye(out=)` as
"aten::eye.out"). The others configure parts of the real runtime the emulator
does not have and are set only so that code reading them sees the device's
values.
"""
from __future__ import annotations

import math
import os

RELEASE_DEFAULTS = {
    "NEURON_LAUNCH_BLOCKING": "1",
    "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS": "0",
    "TORCH_NEURONX_MLIR_ATEN_OPS": "1",
    "TORCH_NEURONX_RETAIN_DEVICE_MODE": "0",
    "NEURON_RT_ALLOW_LEGACY_NEFF": "1",
    "NEURON_RT_DBG_ZEROCOPY": "1",
    "TORCH_NEURONX_ENABLE_ASYNC_NRT": "1",
    "TORCH_NEURONX_ENABLE_STACK_TRACE": "0",
    "JAX_LOGGING_LEVEL": "WARNING",
}


def apply_release_defaults() -> None:
    """os.environ.setdefault for each of RELEASE_DEFAULTS (a value the user set stays)."""
    for name, value in RELEASE_DEFAULTS.items():
        os.environ.setdefault(name, value)


def setting(name: str, default: str = "") -> str:
    """The variable's value, surrounding spaces trimmed; `default` when unset or empty."""
    return os.environ.get(name, "").strip() or default


def milliseconds(name: str, default: float, maximum: float = math.inf) -> float:
    """The variable as a duration in ms, finite and from 0 to `maximum`; `default` when unset
    or empty. Anything else (inf, nan, negative, "2s") raises a ValueError naming it."""
    raw = setting(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0 <= value <= maximum:
        upper = "" if maximum == math.inf else f" to {maximum:g}"
        raise ValueError(f"{name}={raw!r}: expected milliseconds from 0{upper}, e.g. {default:g}")
    return value


def flag(name: str, default: bool = False) -> bool:
    """Whether the variable is set true (the rule above); `default` when unset or empty."""
    from . import _C  # loaded by the package before any flag is read

    return _C._env_flag(name, default)
