"""`torch_neuronx.utils` under the alias: the small helpers torch_neuronx's own
tests and test utilities import (`is_sync_mode_enabled`, `get_cache_size`'s
mode check; `get_neuron_registered_ops` for the autograd-chain check;
`get_platform_target` and the float8 capability checks; environment
switches). Each answers from the emulator's state, as the device's would
from its own; helpers that drive the compiler or NKI are not provided.
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

import torch

from ..execution import native_ops
from .. import environment
from ..devices.device import current_device, machine
from ..devices.streams import launch_blocking


# ---- environment switches (torch_neuronx reads the same variables) -------------------------

def is_sync_mode_enabled() -> bool:
    """NEURON_LAUNCH_BLOCKING=1 (the release default, set at import). The
    emulator always runs ops to completion, a valid schedule of either mode;
    this reports the setting, as the device does."""
    return launch_blocking()


def use_mlir_aten_ops() -> bool:
    """TORCH_NEURONX_MLIR_ATEN_OPS=1, which importing torch_neuronx sets by default."""
    return environment.flag("TORCH_NEURONX_MLIR_ATEN_OPS", True)


def is_stablehlo_enabled() -> bool:
    return environment.flag("TORCH_NEURONX_ENABLE_STABLEHLO", True)


def skip_op_preconditions() -> bool:
    return environment.flag("TORCH_NEURONX_SKIP_OP_PRECONDITIONS")


def is_neff_cache_disabled() -> bool:
    return environment.flag("TORCH_NEURONX_DISABLE_NEFF_CACHE")


def get_gmm_align() -> int:
    return int(environment.setting("TORCH_NEURONX_ATEN_GMM_ALIGN", "128"))


# ---- the machine ---------------------------------------------------------------------------

def get_platform_target() -> str:
    """'trn1', 'trn2' or 'trn3': the simulated instance family (NEURON_SIM_PROFILE)."""
    return machine()["profile"]


def get_lnc_setting() -> str:
    """The logical NeuronCore size the machine runs at ("1" or "2")."""
    return str(machine()["lnc"])


def get_logical_neuron_cores() -> str:
    return environment.setting("NEURON_LOGICAL_NC_CONFIG") or get_lnc_setting()


def get_worker_multiplier() -> int:
    """2 on trn2 at LNC=1 (twice the logical cores), else 1."""
    return 2 if get_platform_target() == "trn2" and get_logical_neuron_cores() == "1" else 1


def is_float8_e4m3_supported() -> bool:
    return get_platform_target() == "trn2"


def is_float8_e4m3fn_supported() -> bool:
    return get_platform_target() != "trn2"


def is_mxocp_supported() -> bool:
    return get_platform_target() != "trn2"


# ---- ops registered for the device ---------------------------------------------------------

def get_neuron_registered_ops(as_sorted: bool = False, keep_variant: bool = False) -> set[str] | list[str]:
    """The ops the device registers a kernel for, without "aten::": "add.Tensor"
    with keep_variant, else "add". Here: the native-op table (ops PyTorch
    decomposes before the device never reach it) and the emulator's own kernels."""
    names = set()
    for full in native_ops.registered():
        op = full.split("::", 1)[1]
        names.add(op if keep_variant else op.split(".")[0])
    return sorted(names) if as_sorted else names


# ---- tensors and warnings ------------------------------------------------------------------

def flatten_tensors(obj: Any) -> list[torch.Tensor]:
    """Every tensor in a nested list/tuple structure, in order."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for item in obj for t in flatten_tensors(item)]
    return []


def get_device_from_tensors(tensors: Any) -> torch.device:
    """The device of the first tensor found, else the current neuron device."""
    found = flatten_tensors(tensors)
    return found[0].device if found else torch.device("neuron", current_device())


def _move(obj: Any, device: str) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_move(x, device) for x in obj)
    if isinstance(obj, dict):
        return {k: _move(v, device) for k, v in obj.items()}
    return obj


def move_pytree_to_cpu(obj: Any) -> Any:
    return _move(obj, "cpu")


def move_pytree_to_neuron(obj: Any) -> Any:
    return _move(obj, "neuron")


def cast_dtype_if_needed(tensor: torch.Tensor, target_dtype: torch.dtype | None) -> torch.Tensor:
    return tensor if target_dtype is None or tensor.dtype == target_dtype else tensor.to(dtype=target_dtype)


@contextmanager
def suppress_specific_warnings(patterns: Iterable[str]) -> Iterator[None]:
    """Warnings whose message contains one of `patterns` are not shown in the block."""
    patterns = list(patterns)
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if not any(p in str(message) for p in patterns):
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown


TORCH_VERSION = torch.__version__
