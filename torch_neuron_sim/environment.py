"""The environment TorchNeuron's release build sets when it is imported.

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
