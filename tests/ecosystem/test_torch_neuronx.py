"""The torch_neuronx API over the emulator: `import torch_neuronx` through
the opt-in alias, the real functions and error messages, and the real
backend's environment variables that carry meaning here."""
import pytest
import torch

import torch_neuron_sim
from conftest import run_python


def test_alias_env_makes_torch_neuronx_importable():
    r = run_python("""
        import torch
        import torch_neuronx
        from torch_neuronx import metrics
        import torch_neuronx.memory
        print(torch_neuronx.__name__, torch_neuronx.device_count())
        x = torch.ones(3, device="neuron")
        torch_neuronx.clear_op_tracking()
        torch.cumprod(x, 0) + x
        print(torch_neuronx.get_fallback_ops(), torch_neuronx.get_executed_ops())
        print(repr(torch_neuronx.get_device_properties(0)))
        print(torch_neuronx.is_neuron_runtime_initialized(), torch_neuronx.get_dynamo_metrics())
        print(torch_neuronx.current_stream() is not None, metrics.report().splitlines()[0])
        try:
            torch_neuronx.set_device(99)
        except ValueError as e:
            print(e)
    """, env={"NEURON_SIM_TORCH_NEURONX_ALIAS": "1", "NEURON_RT_NUM_CORES": "4"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "torch_neuron_sim.torch_neuronx 4"
    assert lines[1] == "['aten::cumprod'] ['aten::add.Tensor', 'aten::empty_strided']"  # allocations are recorded too
    assert lines[2].startswith("<NeuronDeviceProperties(name='trn")
    assert lines[3] == "True []"
    assert lines[4] == "True === Neuron Metrics Report ==="
    assert lines[5] == "Invalid device id: 99. Valid range is 0 to 3"


def test_alias_is_on_from_import_torch():
    # The package's import (torch's autoload) installed the alias: no call needed, and the call changes nothing.
    import sys
    import torch_neuronx
    assert torch_neuronx is sys.modules["torch_neuron_sim.torch_neuronx"]
    assert torch_neuronx.get_device_properties("neuron:0").total_memory > 0
    import torch_neuronx.metrics
    assert sys.modules["torch_neuronx.metrics"] is torch_neuron_sim.metrics
    torch_neuron_sim.install_torch_neuronx_alias()
    assert sys.modules["torch_neuronx"] is torch_neuronx


ENV_PROBE = """
    import torch, torch_neuron_sim
    torch.cumprod(torch.ones(3, device="neuron"), 0)
    try:
        torch.mm(torch.ones(2, 3, device="neuron"), torch.ones(4, 5, device="neuron"))
    except RuntimeError as e:
        print(str(e).splitlines()[0])
"""


def test_strict_fallback_and_quiet_log():
    # TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1: a native op that fails raises the real message;
    # TORCH_NEURONX_LOG_LEVEL=0 (ERROR): the fallback warning is not printed.
    r = run_python(ENV_PROBE, env={"TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS": "1",
                                   "TORCH_NEURONX_LOG_LEVEL": "0"})
    assert r.stdout.startswith("CPU fallback disabled because TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1. "
                               "Operation aten::mm failed to execute on Neuron (last implementation: EmulatorKernel). "
                               "Details: EmulatorKernel: a and b must have same reduction dim"), r
    assert "fell back to CPU" not in r.stderr


def test_default_fallback_and_log():
    r = run_python(ENV_PROBE, env={"TORCH_NEURONX_LOG_LEVEL": "1"})
    assert r.stdout.startswith("a and b must have same reduction dim"), r  # the device's words (its meta check)
    assert "Operator 'aten::cumprod' fell back to CPU" in r.stderr


def test_log_file_gets_the_log(tmp_path):
    """TORCH_NEURONX_LOG_FILE: the log is also appended to that file, in the
    real backend's format; what the file held stays."""
    log = tmp_path / "neuron.log"
    log.write_text("an earlier line\n")
    r = run_python(ENV_PROBE, env={"TORCH_NEURONX_LOG_FILE": str(log), "TORCH_NEURONX_LOG_LEVEL": "1"})
    assert r.returncode == 0, r.stderr
    lines = log.read_text().splitlines()
    assert lines[0] == "an earlier line"
    assert any(line.startswith("[Neuron] [WARNING] ") and "Operator 'aten::cumprod' fell back to CPU" in line
               for line in lines[1:]), lines
    assert "Operator 'aten::cumprod' fell back to CPU" in r.stderr  # the file is in addition to stderr


def test_module_functions_match_the_real_names():
    """torch_neuronx's functions under their real names: the device, memory and
    stream ones are torch.neuron's (tested by what they return in their own
    files); the others are checked here by what they do."""
    from torch_neuron_sim import torch_neuronx
    # set_device and get_device_properties are not: torch.neuron's go through torch_neuronx's, as on the
    # device, so a test that patches torch_neuronx.set_device sees the call (test_torch_neuronx_internals.py).
    for name in ("device_count", "current_device", "empty_cache",
                 "synchronize", "current_stream", "default_stream", "set_stream", "stream", "device", "Stream",
                 "Event", "memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved",
                 "max_memory_reserved", "reset_peak_memory_stats", "reset_accumulated_memory_stats",
                 "memory_summary", "get_dynamo_metrics", "reset_dynamo_metrics"):
        assert getattr(torch_neuronx, name) is getattr(torch.neuron, name), name
    torch_neuronx.clear_op_tracking()
    x = torch.ones(3, device="neuron")
    torch.cumprod(x + x, 0)
    assert torch_neuronx.get_fallback_ops() == ["aten::cumprod"]
    assert "aten::add.Tensor" in torch_neuronx.get_executed_ops()
    torch_neuronx.clear_op_tracking()
    assert torch_neuronx.get_fallback_ops() == [] and torch_neuronx.get_executed_ops() == []
    assert torch_neuronx.is_neuron_runtime_initialized()  # the device was used above
    torch_neuronx._lazy_init()  # in the process that initialised it: nothing to refuse
    assert torch_neuronx.NeuronProfiler().is_active() is False

    m = torch_neuronx.metrics
    was = m.is_enabled()
    try:
        m.set_enabled(False)
        assert m.is_enabled() is False
        m.set_enabled(True)
        assert m.is_enabled() is True
        m.clear_all()
        assert m.get_counter_names() == [] and m.report() == "=== Neuron Metrics Report ===\n"
        torch.randn(3, 41).to("neuron").exp()  # new op signatures: the device compiles them
        total = m.get_counter_value("CompilationCache.TotalCompilations")
        assert total >= 1 and "CompilationCache.TotalCompilations" in m.get_counter_names()
        assert m.report_filtered(["CompilationCache.TotalCompilations"], []) == (
            f"=== Neuron Metrics Report ===\nCounter: CompilationCache.TotalCompilations\n  Value: {total}\n")
        assert f"Counter: CompilationCache.TotalCompilations\n  Value: {total}\n" in m.report()
        assert m.get_compilation_metrics()["CompilationCache.TotalCompilations"] == total
        m.clear_counters()
        assert m.get_counter_value("CompilationCache.TotalCompilations") is None
        m.clear_metrics()
        assert m.get_metric_names() == []
    finally:
        m.set_enabled(was)
    assert set(torch_neuronx._C._get_compilation_cache_stats()) == {"total_entries", "cache_hits", "cache_misses",
                                                             "hit_rate"}
    torch.neuron.reset_dynamo_metrics()  # (earlier tests in this process may have compiled graphs)
    assert torch.neuron.get_dynamo_metrics() == []
    with pytest.raises(AttributeError, match="emulator"):
        torch_neuronx.memory_snapshot  # absent on the real backend too
