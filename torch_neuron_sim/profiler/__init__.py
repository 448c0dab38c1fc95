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

from contextlib import contextmanager
from typing import Any, Iterator, Optional, Sequence

import torch

from .. import _C
from .. import environment
from ..distributed.collective_ops import is_collective
from ..devices.device import _index as _device_index, machine as _device_machine  # the one device parser

TIMING_ENV = "NEURON_SIM_TIMING"  # "model": torch.neuron.Event.elapsed_time reads the model's clock

_CONSTANTS = ("launch_overhead_s", "host_device_bytes_per_s", "transfer_latency_s", "compile_s",
              "collective_latency_s")
# What bounds a device event, named once in C++ (runtime/timeline_summary.cpp):
# the summary of an empty stretch lists every bucket, in order.
BUCKETS: tuple[str, ...] = tuple(_C._prof_summary(0, 0, 0)["breakdown"])
_DEFAULT_LNC = {"trn1": 1, "trn2": 2, "trn3": 2}


def _machine() -> tuple[str, int]:
    m = _device_machine()
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


# Functions that add detail to a timeline's event dicts before they are handed
# out (the NKI simulator adds each launch's seconds per engine): registered by
# the layers that know the detail, so this module depends on none of them.
_event_annotators: list = []


def add_event_annotator(fn: Any) -> None:
    if fn not in _event_annotators:
        _event_annotators.append(fn)


class Timeline:
    """Device events recorded while the block ran, as plain dicts (kind,
    name, device, stream, issue_ns, start_ns, end_ns, seconds,
    launch_seconds, flops, bytes, bound, in_fallback, correlation). Times are
    ns since the Unix epoch; durations are the model's."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.summary: Optional[dict] = None
        self._first: Optional[int] = None

    def start(self) -> "Timeline":
        _C._prof_add_recorder()
        self._first = _C._prof_event_count()
        return self

    def stop(self, events: bool = True, longest: int = 0, drawn: bool = False, later: bool = False) -> "Timeline":
        """Stops recording. ``self.summary`` sums the events up (rows per op and
        kind, seconds per bucket, each stream's busy seconds, the ``longest``
        longest events), computed in C++ in one pass; ``self.events`` holds
        every event as a dict unless ``events`` is False (a long run's report
        then never turns them all into Python objects). With ``drawn`` the
        longest events stay in C++ until ``summary["longest"].dicts()`` turns
        them into dicts as the report draws them: name, kind, lane
        ("neuron:D stream S"), start_ms (from the first event), dur_ms, bound,
        flops, bytes. With ``later`` the summary stays in C++ too:
        ``self.summary`` is then an object whose ``dict()`` returns it (drawn)
        and whose ``model()`` returns the cost model of its events, as
        ``cost_model()`` did when it stopped."""
        if self._first is None:
            return self
        try:
            last = _C._prof_event_count()
            self.summary = (_C._prof_summary_later(self._first, last, longest) if later
                            else _C._prof_summary(self._first, last, longest, drawn))
            if events:
                self.events = list(_C._prof_events(self._first, last))
                for annotate in _event_annotators:
                    annotate(self.events)  # e.g. an NKI launch's seconds per engine (nki/cost.py)
        finally:
            self._first = None
            _C._prof_remove_recorder()
        return self

    def __enter__(self) -> "Timeline":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def timeline() -> Timeline:
    """``with torch_neuron_sim.profiler.timeline() as t: ...`` then ``t.events``."""
    return Timeline()


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


# ---- torch.compile: graph launches and compilations ----------------------------

def recording() -> bool:
    """True while anything records device events (a profile, a timeline, an estimate)."""
    return _C._prof_recording()


def now_ns() -> int:
    """The profiler's clock (ns since the Unix epoch)."""
    return _C._prof_now_ns()


def _tensors(v: Any) -> list:
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _tensors(x)]
    return []


def _desc(t: torch.Tensor) -> tuple[list[int], str]:
    return [int(s) for s in t.shape], str(t.dtype).replace("torch.", "")


def register_graph(name: str, gm: torch.fx.GraphModule) -> int:
    """What one launch of a compiled graph does, for the cost model: one
    entry per op node (its FLOPs from its shapes, by the eager formulas) and
    the HBM bytes it moves when the graph runs as one NEFF: a matmul,
    convolution or attention node reads and writes all its tensors (it is its
    own kernel inside the NEFF); any other node only the tensors that cross
    the graph's boundary (graph inputs it reads, graph outputs it writes) —
    elementwise chains between them are fused. Returns a handle for
    ``record_graph_run``. Shapes come from the nodes' ``meta["val"]``."""
    boundary_in = {n for n in gm.graph.nodes if n.op in ("placeholder", "get_attr")}
    outputs: set = set()
    for n in gm.graph.nodes:
        if n.op == "output":
            torch.fx.node.map_arg(n.args, outputs.add)
    nodes = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
            continue
        if n.target.is_view or "val" not in n.meta:
            continue  # views move no bytes and do no arithmetic
        if is_collective(n.target):
            continue  # collectives are device events of their own (the process group records them)
        ins, crossing = [], 0
        for a in n.all_input_nodes:
            for t in _tensors(a.meta.get("val")):
                ins.append(_desc(t))
                if a in boundary_in:
                    crossing += t.numel() * min(t.element_size(), 4)
        outs = [_desc(t) for t in _tensors(n.meta["val"])]
        if n in outputs:
            crossing += sum(t.numel() * min(t.element_size(), 4) for t in _tensors(n.meta["val"]))
        nodes.append((n.target._schema.name, ins, outs, float(crossing)))
    return _C._prof_register_graph(name, nodes)


def record_graph_run(handle: int, device: Any, issue_ns: int) -> None:
    """One launch of a registered compiled graph, issued at ``issue_ns``
    (``now_ns()`` before it ran): one device event, one launch overhead."""
    _C._prof_record_graph_run(handle, _device_index(device), int(issue_ns))


def model_clock_ms(device: int = 0, stream: int = 0) -> float:
    """A stream's model clock: modelled device time so far, in ms (runs while
    any recorder is active or NEURON_SIM_TIMING=model)."""
    return _C._prof_model_clock_ns(device, stream) / 1e6


def _install() -> None:
    # The Kineto session lives in its own extension (built with USE_KINETO); it reads
    # the device timeline of _C through a table of functions handed over here.
    from .. import _kineto
    _kineto._connect(_C._prof_timeline_api())
    mode = environment.setting(TIMING_ENV).lower()
    if mode not in ("", "wall", "model"):
        raise ValueError(f"{TIMING_ENV}={mode!r}: use 'wall' (the default) or 'model'")
    _C._prof_set_model_clock(mode == "model")
