"""``torch_neuron_sim.estimate(fn, *args, profile="trn2")``: what one step of
``fn`` would take on a Trainium NeuronCore, by the cost model
(docs/profiling.md). It is an estimate, and says so wherever it is printed.

The step runs on the emulator ``warmup`` times first (eager compilations of new
op signatures happen there and are reported as ``compile_seconds``), then once
more under a device timeline. ``total_seconds`` is the busiest stream's
modelled time for that step, as if the host always kept ahead of the device
(the emulator's host is no guide to a real host's speed), so host overhead
appears only as the per-launch overhead of each eager op.

``estimate(..., adaptive_eager=True)`` runs the step under adaptive eager
(docs/semantics.md); ``compare_adaptive_eager(fn, *args)`` estimates the step
with and without it on trn2 and trn3: launches, compilations, device time.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .. import profiler as _profiler

BUCKETS = _profiler.BUCKETS


@dataclass
class OpEstimate:
    """One row of the per-op table: an op (or copy kind) and its modelled device time."""
    name: str
    kind: str
    count: int = 0
    seconds: float = 0.0
    compute: float = 0.0
    memory: float = 0.0
    fallback: float = 0.0
    transfer: float = 0.0
    launch: float = 0.0
    collective: float = 0.0
    compile: float = 0.0
    flops: float = 0.0
    bytes: float = 0.0

    @property
    def bound(self) -> str:
        """The bucket that dominates the row."""
        return max(BUCKETS, key=lambda b: getattr(self, b))


@dataclass
class Estimate:
    """An ESTIMATE of one step on a simulated NeuronCore (not a measurement)."""
    profile: str
    lnc: int
    total_seconds: float
    breakdown: dict
    ops: list
    compile_seconds: float
    events: list = field(repr=False, default_factory=list)
    model: dict = field(repr=False, default_factory=dict)
    nki_kernels: dict = field(default_factory=dict)  # "nki_<kernel>": launches, seconds, seconds per engine
    launches: int = 0              # kernel and graph launches in the step (a fused launch once)
    compilations: int = 0          # compile events in the step (a warm step: usually 0)
    warmup_compilations: int = 0   # compile events in the warm-up runs (the first step's)
    adaptive_launches: int = 0     # the launches adaptive eager would make of this step's events
    adaptive_eager: bool = False   # the step ran under adaptive eager

    @property
    def adaptive_launch_seconds_saved(self) -> float:
        """Launch overhead adaptive eager would save on this step (0 if it ran under it)."""
        return max(0, self.launches - self.adaptive_launches) * self.model.get("launch_overhead_s", 0.0)

    def table(self, row_limit: int = 20) -> str:
        us = 1e6
        lines = [f"ESTIMATE (cost model, not a measurement): one step on {self.profile} at LNC={self.lnc}, "
                 f"one logical NeuronCore per device",
                 f"total {self.total_seconds * 1e3:.3f} ms per step (busiest stream)"
                 + (f"; first step also compiles: {self.compile_seconds:.2f} s" if self.compile_seconds else ""),
                 "breakdown: " + ", ".join(f"{b} {self.breakdown[b] * 1e3:.3f} ms" for b in BUCKETS
                                          if self.breakdown.get(b)),
                 f"launches: {self.launches}" + (" (adaptive eager)" if self.adaptive_eager else
                                                 f"; adaptive eager would make {self.adaptive_launches}"),
                 "",
                 f"{'op':<44} {'calls':>6} {'total us':>10} {'compute':>9} {'memory':>9} {'fallback':>9} "
                 f"{'transfer':>9} {'launch':>9}  bound"]
        for r in self.ops[:row_limit]:
            lines.append(f"{r.name[:44]:<44} {r.count:>6} {r.seconds * us:>10.1f} {r.compute * us:>9.1f} "
                         f"{r.memory * us:>9.1f} {r.fallback * us:>9.1f} {r.transfer * us:>9.1f} "
                         f"{r.launch * us:>9.1f}  {r.bound}")
        if len(self.ops) > row_limit:
            lines.append(f"... {len(self.ops) - row_limit} more rows")
        if self.nki_kernels:
            engines = ("tensor", "vector", "scalar", "gpsimd", "dma")
            lines += ["", f"{'NKI kernel (engines not overlapped)':<44} {'calls':>6} {'total us':>10} "
                      + " ".join(f"{e:>9}" for e in engines)]
            for name, k in sorted(self.nki_kernels.items(), key=lambda kv: -kv[1]["seconds"]):
                lines.append(f"{name[:44]:<44} {k['count']:>6} {k['seconds'] * us:>10.1f} "
                             + " ".join(f"{k[e] * us:>9.1f}" for e in engines))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def to_dict(self) -> dict:
        """Plain data (for JSON and the HTML report)."""
        return {"estimate": True, "profile": self.profile, "lnc": self.lnc, "total_seconds": self.total_seconds,
                "compile_seconds": self.compile_seconds, "breakdown": dict(self.breakdown),
                "ops": [{**r.__dict__, "bound": r.bound} for r in self.ops], "model": dict(self.model),
                "nki_kernels": {k: dict(v) for k, v in self.nki_kernels.items()},
                "launches": self.launches, "compilations": self.compilations,
                "warmup_compilations": self.warmup_compilations,
                "adaptive_eager": {"on": self.adaptive_eager, "launches": self.adaptive_launches,
                                   "launch_seconds_saved": self.adaptive_launch_seconds_saved}}


def adaptive_eager_line(t: dict) -> str:
    """The run's launches with and without adaptive eager (docs/semantics.md), from the timeline summary."""
    a = t.get("adaptive_eager")
    if not a or not t.get("launches"):
        return ""
    if a["on"]:
        return f"{t['launches']} launch(es), under adaptive eager."
    return (f"{t['launches']} launch(es); adaptive eager (TORCH_NEURONX_ENABLE_CONCATENATION=1) would make "
            f"{a['launches']} of them, saving {a['launch_seconds_saved'] * 1e3:.3f} ms of launch overhead "
            f"(compilations: one per distinct run instead of one per op signature).")


def from_summary(summary: dict, profile: str, lnc: int, compile_seconds: float = 0.0,
                 model: Optional[dict] = None, events: Optional[list] = None,
                 adaptive_eager: Optional[bool] = None) -> Estimate:
    """An Estimate from a summed-up device timeline (``Timeline.summary``, made
    in C++ in one pass: rows per op and kind, seconds per bucket, each stream's
    busy time). ``compile_seconds``: compilations outside those events (a
    warm-up); the ones among them (the compile bucket) are added, so the
    report's JSON and the timeline it draws agree. ``adaptive_eager``: whether
    the events were recorded under adaptive eager (None: as it is now)."""
    ops = sorted((OpEstimate(r["name"], r["kind"], r["count"], r["seconds"], flops=r["flops"], bytes=r["bytes"],
                             **{b: r[b] for b in BUCKETS}) for r in summary["rows"]), key=lambda r: -r.seconds)
    breakdown = {b: summary["breakdown"][b] for b in BUCKETS}
    total = max((seconds for _, _, seconds in summary["busy"]), default=0.0)
    if adaptive_eager is None:
        from ..execution import adaptive_eager as _adaptive
        adaptive_eager = _adaptive.enabled()
    on = adaptive_eager  # the events were recorded under adaptive eager: its launches are the real ones
    return Estimate(profile, lnc, total, breakdown, ops, compile_seconds + breakdown["compile"], list(events or []),
                    dict(model or {}), launches=summary.get("launches", 0),
                    compilations=summary.get("compilations", 0),
                    adaptive_launches=summary.get("launches" if on else "fused_launches", 0), adaptive_eager=on)


def estimate(fn: Callable, *args: Any, profile: str = "trn2", lnc: Optional[int] = None, warmup: int = 1,
             adaptive_eager: Optional[bool] = None, **kwargs: Any) -> Estimate:
    """Runs ``fn(*args, **kwargs)`` ``warmup`` times, then once under the
    device timeline, costed for ``profile`` ("trn1", "trn2", "trn3") at
    ``lnc`` (default: the profile's). ``adaptive_eager``: run the step with
    adaptive eager on (True) or off (False); None keeps the current setting.
    Each run ends with a flush, as a step that reads its loss does. Returns an
    :class:`Estimate`; print it for the per-op table."""
    from ..execution import adaptive_eager as _adaptive

    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    lnc = _profiler.default_lnc(profile) if lnc is None else lnc
    mode = contextlib.nullcontext() if adaptive_eager is None else _adaptive.mode(bool(adaptive_eager))
    with _profiler.cost_model_override(profile, lnc) as model, mode:
        compile_seconds, warmup_compilations = 0.0, 0
        for _ in range(warmup):
            with _profiler.timeline() as t:
                fn(*args, **kwargs)
                _adaptive.flush()
            compile_seconds += t.summary["breakdown"]["compile"]
            warmup_compilations += t.summary.get("compilations", 0)
        from ..nki.cost import kernel_costs
        before = kernel_costs()
        with _profiler.timeline() as t:
            fn(*args, **kwargs)
            _adaptive.flush()
        nki = _difference(kernel_costs(), before)
        est = from_summary(t.summary, profile, lnc, compile_seconds, model=model, events=t.events)
    est.nki_kernels = nki
    est.warmup_compilations = warmup_compilations
    return est


def _difference(now: dict, before: dict) -> dict:
    """NKI kernels' totals over the measured step: now minus before (launches, seconds, seconds per engine)."""
    out = {}
    for name, row in now.items():
        prev = before.get(name, {})
        d = {k: v - prev.get(k, 0) for k, v in row.items() if k != "sbuf_peak"}
        if d.get("count"):
            d["sbuf_peak"] = row.get("sbuf_peak", 0)
            out[name] = d
    return out


@dataclass
class AdaptiveEagerComparison:
    """An ESTIMATE of one step with and without adaptive eager, per chip.
    ``rows``: one dict per (profile, mode) with ``profile``, ``adaptive_eager``,
    ``launches`` (per step), ``first_step_compilations`` (from a cold compile
    cache), ``step_seconds`` (busiest stream, warm step), ``launch_seconds``,
    ``first_step_compile_seconds``."""
    rows: list

    def table(self) -> str:
        lines = ["ESTIMATE (cost model, not a measurement): one step with and without adaptive eager",
                 f"{'chip':<6} {'adaptive eager':<15} {'launches':>9} {'compilations':>13} {'step ms':>10} "
                 f"{'launch ms':>10} {'compile s':>10}"]
        for r in self.rows:
            lines.append(f"{r['profile']:<6} {'on' if r['adaptive_eager'] else 'off':<15} {r['launches']:>9} "
                         f"{r['first_step_compilations']:>13} {r['step_seconds'] * 1e3:>10.3f} "
                         f"{r['launch_seconds'] * 1e3:>10.3f} {r['first_step_compile_seconds']:>10.2f}")
        lines.append("compilations and compile s: the first step, from an empty compile cache; step and launch "
                     "ms: a warm step")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def to_dict(self) -> dict:
        return {"estimate": True, "rows": [dict(r) for r in self.rows]}


def compare_adaptive_eager(fn: Callable, *args: Any, profiles: tuple = ("trn2", "trn3"), warmup: int = 1,
                           **kwargs: Any) -> AdaptiveEagerComparison:
    """Estimates ``fn(*args, **kwargs)`` (a training step, say) with adaptive
    eager off and on, for each profile: is adaptive eager worth it for this
    model? Each estimate runs the step ``warmup + 1`` times (a training step
    trains that often) and starts from an empty eager compile cache, as a
    fresh process on the device would, so the first step's compilations of
    the two modes compare."""
    from ..execution import compile_cache

    if warmup < 1:
        raise ValueError(f"compare_adaptive_eager needs warmup >= 1 (the first step's compilations), got {warmup}")
    rows = []
    for profile in profiles:
        for on in (False, True):
            compile_cache.clear()
            est = estimate(fn, *args, profile=profile, warmup=warmup, adaptive_eager=on, **kwargs)
            rows.append({"profile": profile, "adaptive_eager": on, "launches": est.launches,
                         "first_step_compilations": est.warmup_compilations, "step_seconds": est.total_seconds,
                         "launch_seconds": est.breakdown["launch"],
                         "first_step_compile_seconds": est.compile_seconds - est.breakdown["compile"]})
    return AdaptiveEagerComparison(rows)
