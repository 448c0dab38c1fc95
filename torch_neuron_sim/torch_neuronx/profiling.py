"""torch_neuronx.profiling: the profiler as the release's profiling guide uses it.

    from torch_neuronx.profiling import NeuronConfig, ProfileMode, NeuronProfiler
    config = NeuronConfig(modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME, ProfileMode.CPU_UTIL,
                                 ProfileMode.HOST_MEMORY], profile_output_dir="./profile_output")
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                                experimental_config=config, on_trace_ready=NeuronProfiler(config).export_trace):
        ...

export_trace writes profile_output_dir/<host>_pid_<pid>/<timestamp>/: trace.json
(the framework trace, with the simulated `neuron` rows) and one file per mode,
with what the emulator can honestly give: DEVICE, the modelled device timeline
(cost-model estimates, never hardware measurements); RUNTIME, the runtime's
events (executions, copies, compilations, collectives); CPU_UTIL and
HOST_MEMORY, host samples taken while the profile ran. The release's own
artefacts (.neff/.ntff, trace_info.pb/ntrace.pb, cpu_util.pb/host_mem.pb) are
formats of the Neuron runtime and compiler the emulator has not got: the
manifest (neuron_profile.json) lists them as not produced, and the log says so once.
Also NeuronProfiler, torch_neuronx's older context manager (docs/profiling.md).
"""
from __future__ import annotations

import enum
import json
import logging
import os
import socket
import threading
import time
from typing import Any, Optional

import torch
from torch._C._profiler import _ExperimentalConfig


class ProfileMode(enum.Enum):
    DEVICE = "device"  # the release: hardware instructions (.neff, .ntff)
    RUNTIME = "runtime"  # the release: Neuron Runtime system trace (trace_info.pb, ntrace.pb)
    CPU_UTIL = "cpu_util"  # the release: host CPU utilization (cpu_util.pb)
    HOST_MEMORY = "host_memory"  # the release: host memory usage (host_mem.pb)


RELEASE_ARTEFACTS = {ProfileMode.DEVICE: [".neff", ".ntff"], ProfileMode.RUNTIME: ["trace_info.pb", "ntrace.pb"],
                     ProfileMode.CPU_UTIL: ["cpu_util.pb"], ProfileMode.HOST_MEMORY: ["host_mem.pb"]}
WRITTEN = {ProfileMode.DEVICE: "device_timeline.json", ProfileMode.RUNTIME: "runtime_events.json",
           ProfileMode.CPU_UTIL: "cpu_util.json", ProfileMode.HOST_MEMORY: "host_mem.json"}
_RUNTIME_KINDS = ("kernel", "fallback", "copy_h2d", "copy_d2h", "copy_d2d", "compile", "collective", "graph")
_SAMPLE_S = 0.02
_log = logging.getLogger("torch_neuron_sim")
_said: set = set()


def _cores(spec: Optional[str]) -> Optional[set]:
    """ "0,1,2-5" -> {0, 1, 2, 3, 4, 5}; None: every core."""
    if spec is None:
        return None
    cores = set()
    for part in str(spec).split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise ValueError(f"capture_enabled_for_nc={spec!r}: use NeuronCore indices or ranges, e.g. \"0,1,2-5\"")
        cores.update(range(int(lo), int(hi or lo) + 1))
    return cores


class NeuronConfig(_ExperimentalConfig):
    """The release's Neuron profiling options, passed to torch.profiler.profile
    as experimental_config. modes defaults to [DEVICE, RUNTIME];
    capture_enabled_for_nc keeps those devices' events; max_events_per_nc keeps
    each device's newest events; neff_cache_dir and precache_node_info are
    accepted (the emulator compiles no NEFFs)."""

    def __init__(self, modes: Any = None, max_events_per_nc: Optional[int] = None,
                 capture_enabled_for_nc: Optional[str] = None, profile_output_dir: Any = "./output",
                 neff_cache_dir: Any = None, precache_node_info: bool = True) -> None:
        modes = [ProfileMode.DEVICE, ProfileMode.RUNTIME] if modes is None else list(modes)
        bad = [m for m in modes if not isinstance(m, ProfileMode)]
        if bad:
            raise TypeError(f"NeuronConfig(modes=...): expected ProfileMode values, got {bad!r}")
        if max_events_per_nc is not None and int(max_events_per_nc) <= 0:
            raise ValueError(f"max_events_per_nc={max_events_per_nc!r}: must be a positive count")
        options = {"max_events_per_nc": max_events_per_nc, "capture_enabled_for_nc": capture_enabled_for_nc,
                   "profile_output_dir": profile_output_dir}
        super().__init__(custom_profiler_config=";".join(f"{k}:{v}" for k, v in options.items() if v is not None))
        self.modes = modes
        self.max_events_per_nc = None if max_events_per_nc is None else int(max_events_per_nc)
        self.capture_enabled_for_nc = capture_enabled_for_nc
        self.cores = _cores(capture_enabled_for_nc)
        self.profile_output_dir = os.fspath(profile_output_dir)
        self.neff_cache_dir = neff_cache_dir
        self.precache_node_info = precache_node_info
        self._window: Optional[_Window] = None
        self._finished: Optional[_Window] = None


class _Window:
    """One profiled stretch: the device timeline and the host samplers."""

    def __init__(self, config: NeuronConfig) -> None:
        from .. import profiler as sim_profiler
        self.started_ns = time.time_ns()
        self.timeline = sim_profiler.timeline().start()
        self.events: list = []
        self.cpu: list = []
        self.memory: list = []
        self._stop = threading.Event()
        self._thread = None
        self._want_cpu = ProfileMode.CPU_UTIL in config.modes
        self._want_memory = ProfileMode.HOST_MEMORY in config.modes
        self._last = None
        if self._want_cpu or self._want_memory:
            self._sample()
            self._thread = threading.Thread(target=self._run, name="neuron-profile-sampler", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(_SAMPLE_S):
            self._sample()

    def _sample(self) -> None:
        t = time.time_ns()
        if self._want_cpu:
            now = (time.monotonic(), time.process_time(), _per_core_ticks())
            if self._last is not None:
                wall = now[0] - self._last[0]
                sample = {"t_ns": t, "process_percent": 100.0 * (now[1] - self._last[1]) / wall if wall > 0 else 0.0}
                if now[2] and self._last[2]:
                    sample["cores_percent"] = [_busy(a, b) for a, b in zip(self._last[2], now[2])]
                self.cpu.append(sample)
            self._last = now
        if self._want_memory:
            self.memory.append({"t_ns": t, **_memory()})

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._sample()
        self.timeline.stop()
        self.events = list(self.timeline.events)


def _per_core_ticks() -> list:
    # Linux's /proc/stat: per core (busy, total) ticks; elsewhere none (the process figure remains).
    try:
        with open("/proc/stat") as f:
            rows = [line.split() for line in f if line.startswith("cpu") and line[3:4].isdigit()]
    except OSError:
        return []
    out = []
    for row in rows:
        ticks = [int(v) for v in row[1:]]
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
        out.append((sum(ticks) - idle, sum(ticks)))
    return out


def _busy(before: tuple, after: tuple) -> float:
    total = after[1] - before[1]
    return 100.0 * (after[0] - before[0]) / total if total > 0 else 0.0


def _memory() -> dict:
    out = {}
    try:
        with open("/proc/self/statm") as f:
            out["process_rss_bytes"] = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        with open("/proc/meminfo") as f:
            info = {k: int(v.split()[0]) * 1024 for k, v in (line.split(":", 1) for line in f)}
        out["host_total_bytes"], out["host_available_bytes"] = info["MemTotal"], info["MemAvailable"]
    except (OSError, KeyError, ValueError):
        import resource
        out["process_max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out


def _install() -> None:
    """torch.profiler's start/stop of a trace open and close a NeuronConfig's window (once per process)."""
    from torch.profiler import profiler as torch_profiler
    cls = torch_profiler._KinetoProfile
    if getattr(cls.start_trace, "_neuron_config", False):
        return
    start, stop = cls.start_trace, cls.stop_trace

    def start_trace(self: Any) -> None:
        config = getattr(self, "experimental_config", None)
        if isinstance(config, NeuronConfig):
            config._window = _Window(config)
        start(self)

    def stop_trace(self: Any) -> None:
        stop(self)
        config = getattr(self, "experimental_config", None)
        if isinstance(config, NeuronConfig) and config._window is not None:
            config._window.stop()
            config._finished, config._window = config._window, None

    start_trace._neuron_config = stop_trace._neuron_config = True
    cls.start_trace, cls.stop_trace = start_trace, stop_trace


_install()


def _write(path: str, payload: Any) -> None:
    with open(path, "w") as f:
        json.dump(payload, f)


class NRTProfilerError(RuntimeError):
    """Misuse of NeuronProfiler (torch_neuronx.profiling's error class)."""


class NeuronProfiler:
    """torch_neuronx's profiler context manager, and (given a NeuronConfig) the
    release's exporter: `on_trace_ready=NeuronProfiler(config).export_trace`. The real one has the Neuron
    runtime write device traces to ``neuron_output_dir``; here the device rows
    come from the cost model (docs/profiling.md): the PyTorch trace gets
    simulated ``neuron`` rows, and ``neuron_output_dir/neuron_timeline.json``
    holds the device events as plain data, marked as an estimate.
    ``event_filters`` keeps only those event kinds in that file ("kernel",
    "fallback", "copy_h2d", "copy_d2h", "copy_d2d", "compile", "collective",
    "graph")."""

    def __init__(self, pytorch_activities: Any = None, record_shapes: bool = False,
                 pytorch_trace_file: Any = None, neuron_output_dir: Any = "./output", event_filters: Any = None):
        from torch.profiler import ProfilerActivity

        # The release's form, NeuronProfiler(NeuronConfig(...)): an exporter for on_trace_ready.
        self.config = pytorch_activities if isinstance(pytorch_activities, NeuronConfig) else None
        if self.config is not None:
            pytorch_activities, neuron_output_dir = None, self.config.profile_output_dir

        self.pytorch_activities = list(pytorch_activities) if pytorch_activities is not None else [
            ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
        self.record_shapes = record_shapes
        self.pytorch_trace_file = None if pytorch_trace_file is None else os.fspath(pytorch_trace_file)
        self.neuron_output_dir = None if neuron_output_dir is None else os.fspath(neuron_output_dir)
        self.event_filters = None if event_filters is None else set(event_filters)
        self.profiler: Any = None
        self._timeline: Any = None
        self._torch = torch

    def is_active(self) -> bool:
        return self._timeline is not None

    def start(self) -> "NeuronProfiler":
        if self.is_active():
            raise NRTProfilerError("NeuronProfiler is already active; call stop() before start()")
        from .. import profiler as sim_profiler
        self.profiler = self._torch.profiler.profile(activities=self.pytorch_activities,
                                                     record_shapes=self.record_shapes)
        self.profiler.__enter__()
        self._timeline = sim_profiler.timeline().start()
        return self

    def stop(self) -> "NeuronProfiler":
        if not self.is_active():
            raise NRTProfilerError("NeuronProfiler is not active; call start() first")
        timeline, self._timeline = self._timeline, None
        timeline.stop()
        self.profiler.__exit__(None, None, None)
        if self.neuron_output_dir:
            self._write_device_events(timeline.events)
        if self.pytorch_trace_file:
            self.export_pytorch_trace(self.pytorch_trace_file)
        return self

    def _write_device_events(self, events: list) -> None:
        import json
        from .. import profiler as sim_profiler
        if self.event_filters is not None:
            events = [e for e in events if e["kind"] in self.event_filters]
        os.makedirs(self.neuron_output_dir, exist_ok=True)
        with open(os.path.join(self.neuron_output_dir, "neuron_timeline.json"), "w") as f:
            json.dump({"estimate": True, "source": "torch_neuron_sim cost model (docs/profiling.md)",
                       "model": sim_profiler.cost_model(), "events": events}, f)

    def export_pytorch_trace(self, path: Any = None) -> None:
        if self.profiler is None or self.is_active():
            raise NRTProfilerError("export_pytorch_trace needs a stopped profile: use it after stop()")
        path = path if path is not None else self.pytorch_trace_file
        if path is None:
            raise NRTProfilerError("export_pytorch_trace: no path given and no pytorch_trace_file set")
        self.profiler.export_chrome_trace(os.fspath(path))

    def key_averages(self, *args: Any, **kwargs: Any) -> Any:
        return self.profiler.key_averages(*args, **kwargs)

    def __enter__(self) -> "NeuronProfiler":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        if self.is_active():
            self.stop()

    # ---- the release's form: NeuronProfiler(NeuronConfig(...)).export_trace as on_trace_ready ----

    def export_trace(self, prof: Any) -> str:
        """Writes the profile to profile_output_dir/<host>_pid_<pid>/<timestamp>/ (module docstring);
        returns that directory."""
        config = self.config
        if config is None:
            raise NRTProfilerError("export_trace needs NeuronProfiler(NeuronConfig(...))")
        window = config._finished
        if window is None:
            raise NRTProfilerError("export_trace: no finished profile used this NeuronConfig as experimental_config")
        out = os.path.join(config.profile_output_dir, f"{socket.gethostname()}_pid_{os.getpid()}",
                           str(window.started_ns))
        os.makedirs(out, exist_ok=True)
        prof.export_chrome_trace(os.path.join(out, "trace.json"))
        events = [e for e in window.events if config.cores is None or e.get("device") in config.cores]
        if config.max_events_per_nc is not None:
            kept: dict = {}
            for e in reversed(events):  # the newest events of each device survive, as in the runtime's ring
                kept.setdefault(e.get("device"), []).append(e)
            events = sorted((e for per in kept.values() for e in per[:config.max_events_per_nc]),
                            key=lambda e: e.get("start_ns", 0))
        from .. import profiler as sim_profiler
        payloads = {
            ProfileMode.DEVICE: {"estimate": True, "source": "torch_neuron_sim cost model (docs/profiling.md)",
                                 "model": sim_profiler.cost_model(), "events": events},
            # the runtime's side: each call as the host issued it (the device's side is DEVICE's)
            ProfileMode.RUNTIME: {"events": [{k: e.get(k) for k in ("kind", "name", "device", "stream", "issue_ns",
                                                                     "host_end_ns", "correlation")}
                                             for e in events if e.get("kind") in _RUNTIME_KINDS]},
            ProfileMode.CPU_UTIL: {"interval_s": _SAMPLE_S, "samples": window.cpu},
            ProfileMode.HOST_MEMORY: {"interval_s": _SAMPLE_S, "samples": window.memory},
        }
        written, missing = ["trace.json"], []
        for mode in config.modes:
            _write(os.path.join(out, WRITTEN[mode]), payloads[mode])
            written.append(WRITTEN[mode])
            missing += RELEASE_ARTEFACTS[mode]
        _write(os.path.join(out, "neuron_profile.json"), {
            "modes": [m.name for m in config.modes], "written": written, "not_produced": missing,
            "why": "the emulator has no Neuron compiler or runtime: their binary artefacts cannot be made; "
                   "device times are cost-model estimates"})
        if missing and "artefacts" not in _said:
            _said.add("artefacts")
            _log.warning("NeuronProfiler: wrote %s to %s; the emulator cannot produce %s (no Neuron compiler or "
                         "runtime: device times are estimates)", ", ".join(written), out, ", ".join(missing))
        return out
