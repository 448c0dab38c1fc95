"""The 64-bit rule (docs/semantics.md): Trainium has no 64-bit arithmetic, so
native ops compute float64 in float32 and int64 in int32 and cast results
back; fallback ops compute on the CPU at full precision; storage keeps the
requested dtype. NEURON_SIM_DTYPE_POLICY=exact turns the narrowing off (for
debugging: does my numerical difference come from the 64-bit rule?)."""
from __future__ import annotations


import torch

from .. import _C
from .. import environment
from . import tracking

POLICIES = ("trainium", "exact")
# The 64-bit integer dtypes a compiled graph's inputs hold as int32 values on
# the device: the list the C++ launch check uses (dtype_policy.h), read once.
WIDE_INT: tuple[torch.dtype, ...] = tuple(_C._wide_int_dtypes())
# The 64-bit rule's table, read once from C++ (dtype_policy.h), the one place it is
# decided: each wide dtype and the 32-bit dtype native ops compute it in. The NKI
# simulator, compiled graphs and the testing kit read it here.
NARROWED: dict[torch.dtype, torch.dtype] = dict(_C._narrowed_dtypes())
WIDE: tuple[torch.dtype, ...] = tuple(sorted(NARROWED, key=lambda d: not d.is_floating_point))  # float64 first


def set_dtype_policy(policy: str) -> None:
    """'trainium' (default): native ops compute 64-bit types in 32 bits. 'exact': full precision."""
    _C._set_dtype_policy(policy)


def get_dtype_policy() -> str:
    return _C._dtype_policy()


def downcast_counts() -> dict[str, dict[str, int]]:
    """Per native op overload, how many float64 / int64 tensors it computed in 32 bits
    (since the last clear_op_tracking())."""
    return {s["name"]: {"float64": s["downcasts_f64"], "int64": s["downcasts_i64"]}
            for s in tracking.op_stats() if s["downcasts_f64"] or s["downcasts_i64"]}


def host_casts_64bit() -> int:
    """Copies that converted to or from float64/int64 with a neuron tensor on
    either side: the real backend does these on the host."""
    return _C._host_casts64()


def _install() -> None:
    policy = environment.setting("NEURON_SIM_DTYPE_POLICY", "trainium").lower()
    if policy not in POLICIES:
        raise ValueError(f"NEURON_SIM_DTYPE_POLICY={policy!r}: use 'trainium' (default) or 'exact'")
    set_dtype_policy(policy)


def widened_counts() -> dict[str, int]:
    """Per native op overload, how many calls were computed in a wider dtype
    because the CPU kernel lacks the device dtype (histc on int32 computes in
    int64 or float64 and casts back; docs/dtype-widening.md). Since the last
    clear_op_tracking()."""
    from .tracking import op_stats  # the op record's owner

    return {s["name"]: s["widened"] for s in op_stats() if s.get("widened")}


_DTYPE_NAMES = {"Byte": "uint8", "Char": "int8", "Short": "int16", "Int": "int32", "Long": "int64",
                "Half": "float16", "Float": "float32", "BFloat16": "bfloat16", "Bool": "bool"}


def cpu_error_dtypes() -> dict[str, list[str]]:
    """Per native op overload, the device dtypes its CPU kernel lacks that the
    device is not known to compute it in either (gelu on int32), so the call
    raised the CPU kernel's error instead of being widened
    (docs/dtype-widening.md). Since the process started."""
    return {name: [_DTYPE_NAMES.get(d, d) for d in dtypes] for name, dtypes in _C._cpu_error_dtypes()}
