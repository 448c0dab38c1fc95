"""Trainium's numerics where they differ from the CPU's (docs/numerics.md), as
the device's own environment switches them; the rules live in C++
(aten/execution/numerics.cpp) where a native kernel writes its output:

  * NEURON_RT_STOCHASTIC_ROUNDING_EN=1: bf16/fp16 results (native ops,
    compiled graphs run op by op, casts on the device, collectives) computed in
    fp32 and rounded stochastically, from a counter-based stream seeded by
    NEURON_RT_STOCHASTIC_ROUNDING_SEED (default 0).
  * NEURON_CC_FLAGS="--auto-cast matmult|all --auto-cast-type bf16|fp16|tf32|fp8_e4m3":
    fp32 matmuls (or every fp32 op) computed on inputs rounded to the type.
  * integer matmul, scatter-add, index-add, all-reduce and reduce-scatter
    computed in fp32 (exact below 2^24), under the device's dtype policy.

The environment is read at the first op (or the first call here); reread()
makes the next op read it again."""
from __future__ import annotations

from typing import Any

from .. import _C
from . import dtype_policy

_EXACT_IN_FP32 = 1 << 24


def numerics() -> dict[str, Any]:
    """What is active: stochastic rounding and its seed, auto-cast and its type,
    the NEURON_CC_FLAGS read, and whether integers compute in fp32. Raises
    the device's error for a malformed NEURON_CC_FLAGS or seed."""
    d = dict(_C._numerics())
    d["integers_in_fp32"] = dtype_policy.get_dtype_policy() == "trainium"
    d["integer_exact_below"] = _EXACT_IN_FP32
    return d


def reread() -> None:
    """Forget what was read: the next op reads the environment again (a test,
    or a program that changed os.environ after its first op)."""
    _C._numerics_reread()


def rounding_hits() -> dict[str, int]:
    """Integer ops whose inputs or result reached 2^24 (they would round on
    Trainium), by op, since the last clear_rounding_hits()."""
    return dict(_C._rounding_hits())


def clear_rounding_hits() -> None:
    _C._clear_rounding_hits()


def set_rounding_reporter(fn) -> None:
    """The migration report's recorder of such ops (called while a report is active)."""
    _C._set_rounding_reporter(fn)
