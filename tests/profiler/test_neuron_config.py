"""The release's profiling guide, as written: torch.profiler.profile with CPU and
PrivateUse1, experimental_config=NeuronConfig(modes=[...]) from
torch_neuronx.profiling, on_trace_ready=NeuronProfiler(config).export_trace.
Each mode writes what the emulator can honestly give; the release's binary
artefacts are named as not produced."""
import json
import os

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import torch_neuron_sim  # noqa: F401  (torch autoloads it; named for clarity)


def _profile(config, exporter, steps=3):
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to("neuron")
    x = torch.randn(32, 64, device="neuron")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=config,
                 on_trace_ready=exporter.export_trace) as prof:
        for _ in range(steps):
            model(x).sum().backward()
        y = model(x).cpu()
        torch.neuron.synchronize()
    return prof, y


def _run_dir(root):
    (host,) = os.listdir(root)
    assert host.endswith(f"_pid_{os.getpid()}")
    (stamp,) = os.listdir(root / host)
    return root / host / stamp


def test_every_mode_writes_what_the_emulator_can_give(tmp_path, caplog):
    from torch_neuronx.profiling import NeuronConfig, NeuronProfiler, ProfileMode

    config = NeuronConfig(modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME, ProfileMode.CPU_UTIL,
                                 ProfileMode.HOST_MEMORY], profile_output_dir=tmp_path, max_events_per_nc=100000)
    _profile(config, NeuronProfiler(config))
    out = _run_dir(tmp_path)
    assert sorted(os.listdir(out)) == ["cpu_util.json", "device_timeline.json", "host_mem.json",
                                       "neuron_profile.json", "runtime_events.json", "trace.json"]
    manifest = json.loads((out / "neuron_profile.json").read_text())
    assert manifest["not_produced"] == [".neff", ".ntff", "trace_info.pb", "ntrace.pb", "cpu_util.pb", "host_mem.pb"]
    device = json.loads((out / "device_timeline.json").read_text())
    assert device["estimate"] is True
    kernels = [e for e in device["events"] if e["kind"] == "kernel"]
    assert {"aten::linear", "aten::relu"} <= {e["name"] for e in kernels}
    assert all(e["end_ns"] >= e["start_ns"] for e in device["events"])
    runtime = json.loads((out / "runtime_events.json").read_text())["events"]
    assert {"kernel", "copy_d2h"} <= {e["kind"] for e in runtime}
    assert all(set(e) == {"kind", "name", "device", "stream", "issue_ns", "host_end_ns", "correlation"} for e in runtime)
    cpu = json.loads((out / "cpu_util.json").read_text())["samples"]
    assert cpu and all(s["process_percent"] >= 0 for s in cpu)
    memory = json.loads((out / "host_mem.json").read_text())["samples"]
    assert len(memory) >= 2 and all(s.get("process_rss_bytes", s.get("process_max_rss_bytes", 0)) > 0 for s in memory)
    trace = json.loads((out / "trace.json").read_text())
    assert any(e.get("name") == "aten::linear" for e in trace["traceEvents"])


def test_default_modes_and_device_filters(tmp_path):
    from torch_neuronx.profiling import NeuronConfig, NeuronProfiler

    config = NeuronConfig(profile_output_dir=tmp_path, capture_enabled_for_nc="1-3", max_events_per_nc=5)
    assert "capture_enabled_for_nc:1-3" in config.custom_profiler_config
    _profile(config, NeuronProfiler(config))
    out = _run_dir(tmp_path)
    assert json.loads((out / "neuron_profile.json").read_text())["modes"] == ["DEVICE", "RUNTIME"]
    # the work ran on device 0, which is not captured
    assert json.loads((out / "device_timeline.json").read_text())["events"] == []

    config = NeuronConfig(profile_output_dir=tmp_path / "few", max_events_per_nc=5)
    _profile(config, NeuronProfiler(config))
    events = json.loads((_run_dir(tmp_path / "few") / "device_timeline.json").read_text())["events"]
    assert len(events) == 5 and events[-1]["kind"] == "copy_d2h"  # the newest five survive


def test_bad_configuration_is_a_clear_error(tmp_path):
    from torch_neuronx.profiling import NeuronConfig, NeuronProfiler, NRTProfilerError

    with pytest.raises(TypeError, match="expected ProfileMode values"):
        NeuronConfig(modes=["DEVICE"])
    with pytest.raises(ValueError, match="capture_enabled_for_nc='0,x'"):
        NeuronConfig(capture_enabled_for_nc="0,x")
    config = NeuronConfig(profile_output_dir=tmp_path)
    with pytest.raises(NRTProfilerError, match="no finished profile"):
        NeuronProfiler(config).export_trace(None)
    assert (torch.ones(2, device="neuron") + 1).cpu().tolist() == [2.0, 2.0]
