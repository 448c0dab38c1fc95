"""torch_neuronx.metrics (the real `torch_neuronx/metrics.py`): named counters and metrics of the
backend, off by default (TORCH_NEURONX_METRICS_ENABLED=1/true/yes, or
set_enabled(True)), printed by report() in the real backend's format.

What is recorded here: the eager compile cache (docs/semantics.md) and the
graphs torch.compile(backend="neuron") compiles (docs/compile.md), under the
same names::

  Counter CompilationCache.TotalCompilations  new signatures / graphs compiled
  Counter CompilationCache.InMemoryMisses     lookups that missed
  Counter CompilationCache.InMemoryHits       lookups that hit
  Counter CompilationCache.PersistentHits     graphs loaded from the NEFF cache on disk
  Counter CompilationCache.PersistentMisses   graphs not found there
  Counter CompiledGraph.Launches              compiled-graph executions (one per call)
  Metric  CompilationCache.CompilationTime    (simulated) compile time per compilation (ns)
  Metric  CompilationCache.NeffSize           bytes of each compiled graph's artifact

Under adaptive eager (torch_neuron_sim.adaptive_eager) a fused run's
compilation and cache lookups count in the CompilationCache counters, and
three counters of the emulator's own (not names of the real backend) count
its launches:

  Counter AdaptiveEager.Launches              launches of queued eager ops (one per closed run)
  Counter AdaptiveEager.FusedLaunches         those holding two or more ops
  Counter AdaptiveEager.FusedOps              ops inside fused launches
"""
from __future__ import annotations

import dataclasses
from typing import Iterable, Optional

from .. import _C
from .. import environment

_COUNTERS = {
    "CompilationCache.TotalCompilations": "total_compilations",
    "CompilationCache.InMemoryHits": "in_memory_hits",
    "CompilationCache.InMemoryMisses": "in_memory_misses",
}
_METRICS = ("CompilationCache.CompilationTime", "CompilationCache.NeffSize")
_GRAPH_COUNTERS = ("CompilationCache.PersistentHits", "CompilationCache.PersistentMisses", "CompiledGraph.Launches")
_ADAPTIVE_COUNTERS = {"AdaptiveEager.Launches": "launches", "AdaptiveEager.FusedLaunches": "fused_launches",
                      "AdaptiveEager.FusedOps": "fused_ops"}
_counter_base: dict[str, int] = {}
# Compiled graphs (torch_neuron_sim.compile) are counted here in Python: a
# graph compiles rarely, and its launch is one increment.
_graph_counts: dict[str, int] = {}
_graph_samples: dict[str, list[float]] = {}


def _note_graph(name: str, n: int = 1) -> None:
    if is_enabled():
        _graph_counts[name] = _graph_counts.get(name, 0) + n


def _note_graph_sample(name: str, value: float) -> None:
    if is_enabled():
        _graph_samples.setdefault(name, []).append(float(value))


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
    return [n for n in (*_COUNTERS, *_GRAPH_COUNTERS, *_ADAPTIVE_COUNTERS) if get_counter_value(n)]


def get_counter_value(name: str) -> Optional[int]:
    """A counter's value, or None if it has none."""
    if name in _ADAPTIVE_COUNTERS:  # counted in C++ always; reported while metrics are enabled
        from ..execution import adaptive_eager
        value = adaptive_eager.stats()[_ADAPTIVE_COUNTERS[name]] - _counter_base.get(name, 0)
        return value if value and is_enabled() else None
    key = _COUNTERS.get(name)
    if key is None and name not in _GRAPH_COUNTERS:
        return None
    value = _graph_counts.get(name, 0)
    if key is not None:
        value += _raw()[key] - _counter_base.get(name, 0)
    return value or None


def get_metric_names() -> list[str]:
    """Metrics with at least one sample."""
    return [n for n in _METRICS if get_metric_data(n) is not None]


def get_metric_data(name: str) -> Optional[MetricData]:
    if name not in _METRICS:
        return None
    samples = _graph_samples.get(name, [])
    n, total = len(samples), sum(samples)
    lo, hi = min(samples, default=float("inf")), max(samples, default=float("-inf"))
    if name == "CompilationCache.CompilationTime":
        r = _raw()
        if r["time_samples"]:
            n, total = n + r["time_samples"], total + r["time_total_ns"]
            lo, hi = min(lo, r["time_min_ns"]), max(hi, r["time_max_ns"])
    if not n:
        return None
    return MetricData(name, n, float(total), float(lo), float(hi))


def _fmt_ns(ns: float) -> str:
    return f"{ns / 1e6:.3f}ms"


def _fmt_bytes(n: float) -> str:
    return f"{n / 1024:.2f}KB"


def report_filtered(counter_names: Optional[Iterable[str]] = None,
                    metric_names: Optional[Iterable[str]] = None) -> str:
    """The report, restricted to the given names (None = all)."""
    lines = ["=== Neuron Metrics Report ==="]
    for name in (_METRICS if metric_names is None else metric_names):
        d = get_metric_data(name)
        if d is None:
            continue
        fmt = _fmt_ns if name.endswith("Time") else _fmt_bytes
        lines += [f"Metric: {name}", f"  TotalSamples: {d.total_samples}", f"  Accumulator: {fmt(d.accumulator)}",
                  f"  Mean: {fmt(d.mean)}", f"  Min: {fmt(d.min)}", f"  Max: {fmt(d.max)}"]
    for name in ((*_COUNTERS, *_GRAPH_COUNTERS, *_ADAPTIVE_COUNTERS) if counter_names is None else counter_names):
        v = get_counter_value(name)
        if v:
            lines += [f"Counter: {name}", f"  Value: {v}"]
    return "\n".join(lines) + "\n"


def report() -> str:
    """Every non-empty metric and counter, in the real backend's format."""
    return report_filtered()


def _adaptive_base() -> None:
    from ..execution import adaptive_eager
    s = adaptive_eager.stats()
    for name, key in _ADAPTIVE_COUNTERS.items():
        _counter_base[name] = s[key]


def clear_counters() -> None:
    _graph_counts.clear()
    r = _raw()
    for name, key in _COUNTERS.items():
        _counter_base[name] = r[key]
    _adaptive_base()


def clear_metrics() -> None:
    # The C++ side clears counters and samples together; keep the counters.
    r = _raw()
    for name, key in _COUNTERS.items():
        _counter_base[name] = _counter_base.get(name, 0) - r[key]
    _C._clear_compile_metrics()
    _graph_samples.clear()


def clear_all() -> None:
    _C._clear_compile_metrics()
    _counter_base.clear()
    _adaptive_base()
    _graph_counts.clear()
    _graph_samples.clear()


def get_compilation_metrics() -> dict[str, object]:
    """Counters and metrics whose name contains 'Compilation'."""
    out: dict[str, object] = {n: get_counter_value(n) for n in get_counter_names() if "Compilation" in n}
    out.update({n: get_metric_data(n) for n in get_metric_names() if "Compilation" in n})
    return out


def _install() -> None:
    set_enabled(environment.flag("TORCH_NEURONX_METRICS_ENABLED"))
