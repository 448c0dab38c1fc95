"""torch_neuronx.metrics (facts §1c): named counters and metrics of the
backend, off by default (TORCH_NEURONX_METRICS_ENABLED=1/true/yes, or
set_enabled(True)), printed by report() in the real backend's format.

What is recorded here: the eager compile cache (docs/semantics.md).
  Counter CompilationCache.TotalCompilations  new signatures compiled
  Counter CompilationCache.InMemoryMisses     lookups that missed (= compilations)
  Counter CompilationCache.InMemoryHits       lookups that hit
  Metric  CompilationCache.CompilationTime    simulated compile time per compilation (ns)
The persistent-cache and NEFF-size names of the real backend never get
samples here: there is no compiler and no on-disk cache to report on.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Iterable, Optional

from . import _C

_COUNTERS = {
    "CompilationCache.TotalCompilations": "total_compilations",
    "CompilationCache.InMemoryHits": "in_memory_hits",
    "CompilationCache.InMemoryMisses": "in_memory_misses",
}
_METRICS = ("CompilationCache.CompilationTime",)
_counter_base: dict[str, int] = {}


@dataclasses.dataclass
class MetricData:
    """Samples of one metric: the accumulator is the sum of the samples."""
    name: str
    total_samples: int
    accumulator: float
    min: float
    max: float

    @property
    def mean(self) -> float:
        return self.accumulator / self.total_samples if self.total_samples else 0.0

    def __repr__(self) -> str:
        return (f"MetricData(name='{self.name}', total_samples={self.total_samples}, "
                f"accumulator={self.accumulator}, mean={self.mean}, min={self.min}, max={self.max})")


def is_enabled() -> bool:
    return _C._metrics_enabled()


def set_enabled(enabled: bool) -> None:
    _C._set_metrics_enabled(bool(enabled))


def _raw() -> dict:
    return _C._compile_metrics()


def get_counter_names() -> list[str]:
    """Counters with a non-zero value."""
    return [n for n in _COUNTERS if get_counter_value(n)]


def get_counter_value(name: str) -> Optional[int]:
    """A counter's value, or None if it has none."""
    key = _COUNTERS.get(name)
    if key is None:
        return None
    value = _raw()[key] - _counter_base.get(name, 0)
    return value or None


def get_metric_names() -> list[str]:
    """Metrics with at least one sample."""
    return [n for n in _METRICS if get_metric_data(n) is not None]


def get_metric_data(name: str) -> Optional[MetricData]:
    if name not in _METRICS:
        return None
    r = _raw()
    if not r["time_samples"]:
        return None
    return MetricData(name, r["time_samples"], float(r["time_total_ns"]), float(r["time_min_ns"]),
                      float(r["time_max_ns"]))


def _fmt_ns(ns: float) -> str:
    return f"{ns / 1e6:.3f}ms"


def report_filtered(counter_names: Optional[Iterable[str]] = None,
                    metric_names: Optional[Iterable[str]] = None) -> str:
    """The report, restricted to the given names (None = all)."""
    lines = ["=== Neuron Metrics Report ==="]
    for name in (_METRICS if metric_names is None else metric_names):
        d = get_metric_data(name)
        if d is None:
            continue
        lines += [f"Metric: {name}", f"  TotalSamples: {d.total_samples}", f"  Accumulator: {_fmt_ns(d.accumulator)}",
                  f"  Mean: {_fmt_ns(d.mean)}", f"  Min: {_fmt_ns(d.min)}", f"  Max: {_fmt_ns(d.max)}"]
    for name in (_COUNTERS if counter_names is None else counter_names):
        v = get_counter_value(name)
        if v:
            lines += [f"Counter: {name}", f"  Value: {v}"]
    return "\n".join(lines) + "\n"


def report() -> str:
    """Every non-empty metric and counter, in the real backend's format."""
    return report_filtered()


def clear_counters() -> None:
    r = _raw()
    for name, key in _COUNTERS.items():
        _counter_base[name] = r[key]


def clear_metrics() -> None:
    # The C++ side clears counters and samples together; keep the counters.
    r = _raw()
    for name, key in _COUNTERS.items():
        _counter_base[name] = _counter_base.get(name, 0) - r[key]
    _C._clear_compile_metrics()


def clear_all() -> None:
    _C._clear_compile_metrics()
    _counter_base.clear()


def get_compilation_metrics() -> dict[str, object]:
    """Counters and metrics whose name contains 'Compilation'."""
    out: dict[str, object] = {n: get_counter_value(n) for n in get_counter_names() if "Compilation" in n}
    out.update({n: get_metric_data(n) for n in get_metric_names() if "Compilation" in n})
    return out


def _install() -> None:
    flag = os.environ.get("TORCH_NEURONX_METRICS_ENABLED", "").strip().lower()
    set_enabled(flag in ("1", "true", "yes"))
