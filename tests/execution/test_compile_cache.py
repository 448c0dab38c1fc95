"""The eager compile cache and torch_neuronx.metrics: one compilation per new
(op, dtypes, shapes) signature, hits for repeats, real metric names and
report format, TORCH_NEURONX_METRICS_ENABLED, NEURON_SIM_COMPILE_MS."""
import pytest
import torch

import torch_neuron_sim
from torch_neuron_sim import compile_cache, metrics
from conftest import run_python


@pytest.fixture(autouse=True)
def default_native_ops():
    """These tests rely on the default table; other tests may have changed it."""
    torch_neuron_sim.native_ops.load()


def test_new_shapes_compile_and_repeats_hit():
    compile_cache.clear()
    a, b = torch.ones(4, 4, device="neuron"), torch.ones(8, 4, device="neuron")
    for _ in range(3):
        torch.mm(a, a)
    torch.mm(b, a)
    mm = compile_cache.op_signatures()["aten::mm"]
    assert mm == {"compilations": 2, "cache_hits": 2}
    # float64 is compiled as float32: same NEFF
    torch.mm(a.double(), a.double())
    assert compile_cache.op_signatures()["aten::mm"]["compilations"] == 2
    s = compile_cache.stats()
    assert s["total_entries"] >= 2 and 0 < s["hit_rate"] < 1


def test_fallback_ops_do_not_compile():
    compile_cache.clear()
    torch.cumprod(torch.ones(5, device="neuron"), 0)
    assert not any("cumprod" in op for op in compile_cache.op_signatures())


def test_metrics_disabled_by_default():
    assert not metrics.is_enabled()
    torch.mm(torch.ones(3, 3, device="neuron"), torch.ones(3, 3, device="neuron"))
    assert metrics.get_counter_value("CompilationCache.TotalCompilations") is None
    assert metrics.report() == "=== Neuron Metrics Report ===\n"


def test_metrics_report_with_simulated_compile_latency():
    r = run_python("""
        import time, torch, torch_neuron_sim
        from torch_neuron_sim import metrics as m
        assert m.is_enabled()
        a = torch.ones(5, 5, device="neuron")
        m.clear_all()
        t0 = time.perf_counter()
        torch.mm(a, a)                       # new signature: compiles (30 ms simulated)
        first = time.perf_counter() - t0
        torch.mm(a, a); torch.mm(a, a)       # hits
        assert first >= 0.03, first
        assert m.get_counter_value("CompilationCache.TotalCompilations") == 1
        assert m.get_counter_value("CompilationCache.InMemoryMisses") == 1
        assert m.get_counter_value("CompilationCache.InMemoryHits") == 2
        assert m.get_counter_value("no.such.counter") is None
        d = m.get_metric_data("CompilationCache.CompilationTime")
        assert d.total_samples == 1 and d.accumulator == 30e6, d
        print(m.report(), end="")
        print(sorted(m.get_compilation_metrics()))
        m.clear_counters()
        assert m.get_counter_value("CompilationCache.InMemoryHits") is None
        assert m.get_metric_data("CompilationCache.CompilationTime").total_samples == 1
        m.clear_all()
        assert m.get_metric_names() == [] and m.get_counter_names() == []
    """, env={"TORCH_NEURONX_METRICS_ENABLED": "1", "NEURON_SIM_COMPILE_MS": "30"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(
        "=== Neuron Metrics Report ===\n"
        "Metric: CompilationCache.CompilationTime\n  TotalSamples: 1\n  Accumulator: 30.000ms\n"
        "  Mean: 30.000ms\n  Min: 30.000ms\n  Max: 30.000ms\n"
        "Counter: CompilationCache.TotalCompilations\n  Value: 1\n"
        "Counter: CompilationCache.InMemoryHits\n  Value: 2\n"
        "Counter: CompilationCache.InMemoryMisses\n  Value: 1\n"), r.stdout
    assert ("['CompilationCache.CompilationTime', 'CompilationCache.InMemoryHits', "
            "'CompilationCache.InMemoryMisses', 'CompilationCache.TotalCompilations']") in r.stdout


def test_set_enabled_at_runtime():
    try:
        metrics.set_enabled(True)
        x = torch.ones(7, 3, device="neuron")
        torch_neuron_sim.compile_cache.clear()
        metrics.clear_all()
        x + x
        assert metrics.get_counter_value("CompilationCache.TotalCompilations") == 1
    finally:
        metrics.set_enabled(False)
        metrics.clear_all()
