"""Op tracking as the real backend has it: which ops ran on the device, which
fell back to the CPU, and how often. The counting happens in C++ on the
per-op path; this module only reads it.

Names, as torch_neuronx records them: an executed op under the overload of
the kernel that ran ("aten::add.Tensor", "aten::relu"; never ".default"), or
under the registration the device reaches instead ("aten::div.out" for
div.Tensor); a fallback op under the overload called ("aten::mul.Tensor").
The rules are data: torch_neuron_sim/native_ops/tracking.rules, rendered in
docs/op-tracking.md.
"""
from __future__ import annotations

import logging

from .. import _C
from .. import environment

logger = logging.getLogger("torch_neuron_sim")


def get_fallback_ops() -> list[str]:
    """Ops that fell back to the CPU since the last clear_op_tracking()."""
    return sorted({name for name, _, _, fell in _C._op_counts() if fell})


def get_executed_ops() -> list[str]:
    """Ops that ran natively on neuron since the last clear_op_tracking(),
    by the names the device records ("aten::add.Tensor", "aten::empty")."""
    return sorted({recorded for _, recorded, ran, _ in _C._op_counts() if ran})


def get_op_counts() -> dict[str, dict[str, int]]:
    """Per operator overload called: {"aten::add.Tensor": {"executed": n, "fallback": m}}."""
    return {name: {"executed": ran, "fallback": fell} for name, _, ran, fell in sorted(_C._op_counts())}


def clear_op_tracking() -> None:
    """Reset the executed and fallback records (collective counts included)."""
    _C._clear_op_tracking()
    from .. import distributed  # imported after tracking (the package's __init__)
    distributed.clear_collective_counts()


def host_device_copies() -> int:
    """Copies between host and device since the process started: none for a
    native op; a fallback op copies its inputs to the host and its results back."""
    return _C._host_device_copies()


def set_fallback_mode(mode: str) -> None:
    """'warn' (default): fall back, log once per op. 'error': raise instead."""
    _C._set_fallback_mode(mode)


def set_fallback_only_for_unimplemented(on: bool) -> None:
    """TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS: a native op whose kernel
    fails raises instead of being retried on the CPU."""
    _C._set_fallback_only_for_unimplemented(bool(on))


def fallback_mode() -> str:
    return _C._fallback_mode()


def op_stats() -> list[dict]:
    """The op record of every op with any activity: name, native, executed,
    fallbacks, downcasts_f64, downcasts_i64, compilations, cache_hits, widened."""
    return _C._op_stats()


def untracked_op_names() -> list[str]:
    """View and metadata ops whose fallbacks are never recorded (as on the real
    backend), by full name ("aten::view"; "aten::transpose.int" is not one)."""
    return _C._untracked_op_names()


def unsupported_features() -> dict[str, int]:
    """Unsupported features met since the process started, with counts."""
    return dict(_C._unsupported_hits())


def _announce(op_name: str, why: str) -> None:
    # Called from C++ the first time an op falls back (never per call), with
    # the reason of that first fallback.
    logger.warning(
        "Operator '%s' fell back to CPU: %s, so its inputs were copied to the host and back. "
        "torch_neuron_sim.get_fallback_ops() lists every such op.", op_name, why)


def _install() -> None:
    _C._set_fallback_logger(_announce)
    mode = environment.setting("NEURON_SIM_FALLBACK", "warn").lower()
    if mode not in ("warn", "error"):
        raise ValueError(f"NEURON_SIM_FALLBACK={mode!r}: use 'warn' (default) or 'error'")
    _C._set_fallback_mode(mode)
