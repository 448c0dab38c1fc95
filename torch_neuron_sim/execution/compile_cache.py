"""The eager compile cache. On Trainium each native op call with a new
(op, dtypes, shapes) signature is compiled to a NEFF by neuronx-cc before it
runs, and repeats hit an in-memory cache; a model whose shapes keep changing
keeps compiling. The emulator keeps the same cache of signatures (a hash in
C++ per native call) so the number of compilations a program would trigger
is visible, and NEURON_SIM_COMPILE_MS adds a simulated latency to each
compilation so the first-step cost shows up in wall time too."""
from __future__ import annotations

import math

from .. import _C
from .. import environment
from . import tracking


def set_compile_latency_ms(ms: float) -> None:
    """Simulated neuronx-cc time per new signature (0 = none, the default)."""
    ms = float(ms)
    # inf would stall every new signature for ever; nan and negatives mean nothing
    if not math.isfinite(ms) or ms < 0:
        raise ValueError(f"a compile latency is a finite number of milliseconds >= 0, got {ms}")
    _C._set_compile_latency_ms(ms)


def compile_latency_ms() -> float:
    return _C._compile_latency_ms()


def op_signatures() -> dict[str, dict[str, int]]:
    """Per native op overload: distinct signatures compiled and cache hits."""
    return {s["name"]: {"compilations": s["compilations"], "cache_hits": s["cache_hits"]}
            for s in tracking.op_stats() if s["compilations"]}


def stats() -> dict[str, float]:
    """The cache as torch_neuronx's _C._get_compilation_cache_stats() reports it."""
    ops = op_signatures().values()
    entries = sum(o["compilations"] for o in ops)
    hits = sum(o["cache_hits"] for o in ops)
    total = entries + hits
    return {"total_entries": entries, "cache_hits": hits, "cache_misses": entries,
            "hit_rate": hits / total if total else 0.0}


def clear() -> None:
    """Forget every compiled signature: the next call of each op compiles again."""
    _C._clear_compile_cache()


def _install() -> None:
    set_compile_latency_ms(environment.milliseconds("NEURON_SIM_COMPILE_MS", 0.0))
