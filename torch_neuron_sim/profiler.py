"""The simulated Trainium timeline (docs/profiling.md).

Every native op, copy, CPU-fallback round trip, eager compilation and
collective that the device would run becomes a *device event* whose duration
comes from a cost model of the chip (a roofline per op over one logical
NeuronCore's share of peak compute and HBM bandwidth, plus launch, transfer
and compile costs). Device events reach:

- ``torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])``:
  rows per device and stream, correlated with the CPU op that issued them;
- ``torch_neuron_sim.profiler.timeline()``: the same events as plain data;
- ``torch_neuron_sim.estimate(fn, *args)``: a per-step estimate.

All durations are estimates of a model, never measurements of hardware.
Other layers report their work with ``record_collective``,
``record_compilation`` and ``record_graph_launch``.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Sequence

import torch

from . import _C

TIMING_ENV = "NEURON_SIM_TIMING"  # "model": torch.neuron.Event.elapsed_time reads the model's clock

_CONSTANTS = ("launch_overhead_s", "host_device_bytes_per_s", "transfer_latency_s", "compile_s",
              "collective_latency_s")
_DEFAULT_LNC = {"trn1": 1, "trn2": 2, "trn3": 2}


def _machine() -> tuple[str, int]:
    m = _C._machine()
    return m["profile"], m["lnc"]


def default_lnc(profile: str) -> int:
    """The LNC a profile runs at here: the machine's own when it is that
    profile (NEURON_LOGICAL_NC_CONFIG), else the runtime's default."""
    name, lnc = _machine()
    if profile == name:
        return lnc
    if profile not in _DEFAULT_LNC:
        raise ValueError(f"unknown Trainium profile {profile!r}; use trn1, trn2 or trn3")
    return _DEFAULT_LNC[profile]


def cost_model() -> dict:
    """The model new device events are costed with: profile, LNC, per-core
    peak FLOP/s per dtype, HBM and link bandwidth, and the constants."""
    return dict(_C._prof_cost_model())


def model_figures(profile: str = "trn2", lnc: Optional[int] = None, **constants: float) -> dict:
    """The figures of a model without installing it (for docs and tests)."""
    return dict(_C._prof_model_figures(profile, default_lnc(profile) if lnc is None else lnc, constants))


def set_cost_model(profile: Optional[str] = None, lnc: Optional[int] = None, **constants: float) -> dict:
    """Cost new device events with another profile, LNC or constants (named
    as in ``cost_model()``; omitted ones take their defaults). With no
    arguments, returns to the machine's profile and LNC. Returns the
    previous model's settings, which ``set_cost_model(**previous)`` restores."""
    previous = _settings(cost_model())
    unknown = set(constants) - set(_CONSTANTS)
    if unknown:
        raise ValueError(f"unknown cost model constant(s) {sorted(unknown)}; known: {list(_CONSTANTS)}")
    if profile is None:
        profile = _machine()[0]
    _C._prof_set_cost_model(profile, default_lnc(profile) if lnc is None else lnc, constants)
    return previous


def _settings(model: dict) -> dict:
    return {"profile": model["profile"], "lnc": model["lnc"], **{k: model[k] for k in _CONSTANTS}}


@contextmanager
def cost_model_override(profile: Optional[str] = None, lnc: Optional[int] = None,
                        **constants: float) -> Iterator[dict]:
    """``with cost_model_override("trn3"):`` costs events with trn3's figures inside the block."""
    previous = set_cost_model(profile, lnc, **constants)
    try:
        yield cost_model()
    finally:
        set_cost_model(**previous)


def op_cost(op: str, inputs: Sequence[tuple[Sequence[int], str]], outputs: Sequence[tuple[Sequence[int], str]],
            profile: str = "trn2", lnc: Optional[int] = None) -> dict:
    """The model's cost of one eager op, described by name and (shape, dtype
    name) pairs: ``op_cost("aten::mm", [((M, K), "bfloat16"), ((K, N), "bfloat16")],
    [((M, N), "bfloat16")])`` -> seconds, launch_seconds, bound, flops, bytes."""
    ins = [(list(s), str(d).replace("torch.", "")) for s, d in inputs]
    outs = [(list(s), str(d).replace("torch.", "")) for s, d in outputs]
    return dict(_C._prof_op_cost(profile, default_lnc(profile) if lnc is None else lnc, op, ins, outs))


class Timeline:
    """Device events recorded while the block ran, as plain dicts (kind,
    name, device, stream, issue_ns, start_ns, end_ns, seconds,
    launch_seconds, flops, bytes, bound, in_fallback, correlation). Times are
    ns since the Unix epoch; durations are the model's."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self._first: Optional[int] = None

    def start(self) -> "Timeline":
        _C._prof_add_recorder()
        self._first = _C._prof_event_count()
        return self

    def stop(self) -> "Timeline":
        if self._first is None:
            return self
        try:
            self.events = list(_C._prof_events(self._first, _C._prof_event_count()))
        finally:
            self._first = None
            _C._prof_remove_recorder()
        return self

    def __enter__(self) -> "Timeline":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def busy_seconds(self) -> dict:
        """Modelled busy time per (device, stream)."""
        out: dict = {}
        for e in self.events:
            key = (e["device"], e["stream"])
            out[key] = out.get(key, 0.0) + e["seconds"]
        return out


def timeline() -> Timeline:
    """``with torch_neuron_sim.profiler.timeline() as t: ...`` then ``t.events``."""
    return Timeline()


def _device_index(device: Any) -> int:
    if device is None:
        return -1
    if isinstance(device, int):
        return device
    d = torch.device(device)
    if d.type != "neuron":
        raise ValueError(f"expected a neuron device, got {d}")
    return -1 if d.index is None else d.index


def record_collective(name: str, nbytes: int, world_size: int, device: Any = None) -> None:
    """A collective (``"all_reduce"``, ``"all_gather_into_tensor"``, ``"reduce_scatter_tensor"``,
    ``"broadcast"``, ``"all_to_all"``, ``"barrier"`` ...) moving one rank's buffer of ``nbytes``
    among ``world_size`` ranks: one device event, costed as a ring over NeuronLink. Call it
    where the collective is issued (inside its op) so the trace links it to the CPU op."""
    _C._prof_record_collective(name, _device_index(device), float(nbytes), int(world_size))


def record_compilation(name: str, seconds: Optional[float] = None, device: Any = None) -> None:
    """A graph compilation (torch.compile): one device event lasting ``seconds``,
    or the model's compile latency when None."""
    _C._prof_record_graph_compile(name, _device_index(device), -1.0 if seconds is None else float(seconds))


def record_graph_launch(name: str, flops: float, nbytes: float, dtype: Any = "bfloat16", device: Any = None) -> None:
    """One launch of a compiled graph doing ``flops`` of arithmetic in ``dtype``
    and moving ``nbytes`` through HBM: a roofline with one launch overhead."""
    _C._prof_record_graph_launch(name, _device_index(device), float(flops), float(nbytes),
                                 str(dtype).replace("torch.", ""))


def model_clock_ms(device: int = 0, stream: int = 0) -> float:
    """A stream's model clock: modelled device time so far, in ms (runs while
    any recorder is active or NEURON_SIM_TIMING=model)."""
    return _C._prof_model_clock_ns(device, stream) / 1e6


def _install() -> None:
    # The Kineto session lives in its own extension (built with USE_KINETO); it reads
    # the device timeline of _C through a table of functions handed over here.
    from . import _kineto
    _kineto._connect(_C._prof_timeline_api())
    mode = os.environ.get(TIMING_ENV, "").strip().lower()
    if mode not in ("", "wall", "model"):
        raise ValueError(f"{TIMING_ENV}={mode!r}: use 'wall' (the default) or 'model'")
    _C._prof_set_model_clock(mode == "model")


class TraceRecorder:
    """torch.profiler (CPU and neuron rows) plus the device timeline, for a
    whole run: ``python -m torch_neuron_sim report --timeline trace.json script.py``."""

    def __init__(self) -> None:
        from torch.profiler import ProfilerActivity, profile
        self._profile = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])
        self._timeline = Timeline()

    def start(self) -> "TraceRecorder":
        self._profile.__enter__()
        self._timeline.start()
        return self

    def stop(self, path: str) -> None:
        self._timeline.stop()
        self._profile.__exit__(None, None, None)
        self._profile.export_chrome_trace(path)
        self.path = path

    def summary(self) -> dict:
        """The run's modelled device time by bucket and op (plain data), marked as an estimate."""
        from .estimate import summarize
        m = cost_model()
        d = summarize(self._timeline.events, m["profile"], m["lnc"], model=m).to_dict()
        d["trace"] = self.path
        return d
