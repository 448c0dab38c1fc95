"""One graph's compilation, in the real backend's phases, each timed into
torch._dynamo.utils.compilation_time_metrics:

  fx_passes  put the graph on the device (retarget.py: 64-bit narrowing,
             host graphs moved to the device)
  lower      check every op against the device (graph_check.py) and compute
             the cache key: the graph's code and its input signature
  compile    the NEFF cache (in memory, then on disk: neff_cache.py), else a
             compilation (NEURON_SIM_COMPILE_MS of simulated neuronx-cc time,
             stored to the cache); then the executor builds the callable

A graph with an op the device cannot compile "fails to compile", as on the
device: it runs as the eager graph (executors.graph) with a warning naming
the ops, or raises under TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=1."""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

import torch

from ..execution import compile_cache, native_ops
from ..torch_neuronx import metrics
from .. import profiler
from .. import environment
from . import dynamo_metrics, executors, flex_attention, graph_check, graphs, neff_cache, retarget
from .options import Options

log = logging.getLogger("torch_neuron_sim")
_memory_cache: set[str] = set()  # keys compiled (or loaded) in this process
_lock = threading.Lock()


def fallback_execution_disabled() -> bool:
    return environment.flag("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION")


def graph_name(model_name: str) -> str:
    from torch._functorch._aot_autograd import logging_utils
    being, _, nth = logging_utils.get_aot_compilation_context()
    return f"{model_name}_{'_'.join(being) or 'graph'}_{nth}"


def graph_device(example_inputs: list[Any]) -> torch.device:
    for x in example_inputs:
        if isinstance(x, torch.Tensor) and x.device.type == "neuron":
            return torch.device("neuron", x.device.index if x.device.index is not None else 0)
    return torch.device("neuron", torch.neuron.current_device())


def signature(example_inputs: list[Any]) -> str:
    parts = []
    for x in example_inputs:
        if isinstance(x, torch.Tensor):
            parts.append(f"{x.dtype}{tuple(x.shape)}{tuple(x.stride())}")
        else:
            parts.append(repr(x))
    return ";".join(parts)


def _recompile_reason() -> str | None:
    try:
        from torch._dynamo.utils import get_metrics_context
        return get_metrics_context()._metrics.get("recompile_reason")  # set by Dynamo for this frame
    except Exception:  # private: absent in another torch version means "unknown"
        return None


def compile_graph(gm: torch.fx.GraphModule, example_inputs: list[Any], kind: str, opts: Options) -> Callable:
    name = graph_name(opts.model_name)
    device = graph_device(example_inputs)
    record = graphs.GraphRecord(name=name, kind=kind, graph_id="", node_count=0, device=str(device),
                                executor=opts.executor, model_name=opts.model_name,
                                recompile_reason=_recompile_reason())

    t0 = time.perf_counter()
    if flex_attention.needed(gm):  # FlexAttention's higher-order ops as ATen ops
        gm = flex_attention.legalize(gm)
    narrow = retarget.narrowing()  # the 64-bit rule as it stands now: the graph keeps it
    if retarget.needed(gm, example_inputs, device, narrow):
        gm = retarget.rewrite(gm, example_inputs, device, narrow)
        example_inputs = [retarget.input_on_device(x, device, narrow) for x in example_inputs]
    t1 = time.perf_counter()
    dynamo_metrics.record_phase(record, "torch_neuronx_fx_passes", t1 - t0)

    bad = graph_check.non_native_ops(gm)
    code, inputs = gm.code, signature(example_inputs)
    record.graph_id = neff_cache.key_of(code, inputs, kind, str(device), opts.executor, native_ops.version(),
                                        torch.__version__)
    record.node_count = graph_check.node_count(gm)
    record.has_collectives = graph_check.has_collectives(gm)
    record.fallback_ops = bad
    t2 = time.perf_counter()
    dynamo_metrics.record_phase(record, "torch_neuronx_lower", t2 - t1)

    if bad:
        if fallback_execution_disabled():
            raise RuntimeError(
                f"Neuron compilation of graph {name} failed: ops without a Neuron lowering: {', '.join(bad)}. "
                "Fallback execution is disabled (TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=1); unset it to run "
                "the graph eagerly, op by op")
        log.warning("torch.compile(backend='neuron'): graph %s failed to compile: ops without a Neuron lowering: "
                    "%s. It runs as the eager graph (op by op, CPU fallbacks tracked)", name, ", ".join(bad))
        record.executor = "eager-fallback"
        fn = executors.graph(gm, example_inputs, kind)
    else:
        # The artifact: what identifies the compiled graph (not its name, which
        # numbers graphs in compile order and differs between processes).
        payload = (f"// {kind} graph on {device}\n// inputs: {inputs}\n{code}").encode()
        record.neff_bytes = len(payload)
        record.cache = _lookup_or_compile(record.graph_id, payload)
        if record.cache == "compiled":  # on the device timeline, at the model's compile latency
            profiler.record_compilation(f"compile {name}", device=device)
        if opts.executor == "inductor":
            try:
                fn = executors.inductor(gm, example_inputs, kind)
            except Exception as e:  # Inductor's CPU codegen on our device: not a device failure
                log.warning("torch.compile(backend='neuron'): Inductor could not generate code for graph %s "
                            "(%s: %s); it runs op by op instead", name, type(e).__name__, str(e).strip()[:200])
                record.executor = "graph"
                fn = executors.graph(gm, example_inputs, kind)
        else:
            fn = executors.graph(gm, example_inputs, kind)
    record.compile_seconds = time.perf_counter() - t2
    dynamo_metrics.record_phase(record, "torch_neuronx_compile", record.compile_seconds)
    graphs.add(record)
    # A compiled unit's launches are device events costed from its kernels; a
    # graph that failed to compile runs op by op (each op its own event).
    work = None if bad else profiler.register_graph(name, gm)
    return executors.Launch(fn, device, executors.mutated_inputs(gm), record.note_launch, narrow, unit=not bad,
                            work=work)


def _lookup_or_compile(key: str, payload: bytes) -> str:
    """The NEFF cache: 'memory', 'persistent' (hits) or 'compiled'."""
    with _lock:
        if key in _memory_cache:
            metrics._note_graph("CompilationCache.InMemoryHits")
            return "memory"
        metrics._note_graph("CompilationCache.InMemoryMisses")
    if neff_cache.persistent_enabled():
        stored = neff_cache.load(key)
        if stored == payload:
            metrics._note_graph("CompilationCache.PersistentHits")
            with _lock:
                _memory_cache.add(key)
            return "persistent"
        metrics._note_graph("CompilationCache.PersistentMisses")
    t = time.perf_counter_ns()
    ms = compile_cache.compile_latency_ms()
    if ms > 0:  # the simulated neuronx-cc time, once per graph
        time.sleep(ms / 1000)
    metrics._note_graph("CompilationCache.TotalCompilations")
    metrics._note_graph_sample("CompilationCache.CompilationTime", time.perf_counter_ns() - t)
    metrics._note_graph_sample("CompilationCache.NeffSize", len(payload))
    if neff_cache.persistent_enabled():
        neff_cache.store(key, payload)
    with _lock:
        _memory_cache.add(key)
    return "compiled"


def clear_memory_cache() -> None:
    with _lock:
        _memory_cache.clear()
