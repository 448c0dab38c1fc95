"""The device as the release build presents it: the environment import sets, one stream
per device unless host collectives, `.data =` across CPU and neuron, the default device
of a new thread, device indices and counts (128 at most, more cores than a chip), the
memory the device reports reserved, and CUDA's words for event misuse."""
import re
import sys
import threading

import pytest
import torch

import torch_neuron_sim
from torch_neuron_sim.testing import requires_nrt_streams
from torch_neuronx_user import D, torch_neuronx, copy_entry_points_restored, neuronx_alias  # noqa: F401 (fixtures)


_RELEASE_ENV = {"NEURON_LAUNCH_BLOCKING": "1", "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS": "0",
                "TORCH_NEURONX_MLIR_ATEN_OPS": "1", "TORCH_NEURONX_RETAIN_DEVICE_MODE": "0",
                "NEURON_RT_ALLOW_LEGACY_NEFF": "1", "NEURON_RT_DBG_ZEROCOPY": "1",
                "TORCH_NEURONX_ENABLE_ASYNC_NRT": "1", "TORCH_NEURONX_ENABLE_STACK_TRACE": "0",
                "JAX_LOGGING_LEVEL": "WARNING"}


def test_import_sets_the_environment_torch_neuronx_sets():
    import json
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in _RELEASE_ENV}
    env["JAX_LOGGING_LEVEL"] = "ERROR"  # a value the user set stays
    code = ("import os, json, torch, torch_neuron_sim; "
            f"print(json.dumps({{k: os.environ.get(k) for k in {sorted(_RELEASE_ENV)!r}}}))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == {**_RELEASE_ENV, "JAX_LOGGING_LEVEL": "ERROR"}


def test_single_stream_mode_unless_host_cc():
    s = torch.neuron.Stream()
    assert s == torch_neuronx.default_stream() and hash(s) == hash(torch_neuronx.default_stream())
    assert torch.neuron.Stream(priority=-1) == torch_neuronx.default_stream()
    with requires_nrt_streams():
        t = torch.neuron.Stream()
        assert t != torch_neuronx.default_stream() and t.stream_id != 0
    assert torch.neuron.Stream() == torch_neuronx.default_stream()


def test_streams_read_host_cc_each_time_one_is_created(monkeypatch):
    default = torch_neuronx.default_stream()
    monkeypatch.setenv("NEURON_RT_ENABLE_HOST_CC", "1")  # set after import, no other call
    s, t = torch.neuron.Stream(), torch.neuron.Stream()
    assert s != default and t != default and s != t
    monkeypatch.setenv("NEURON_RT_ENABLE_HOST_CC", "true")  # only exactly "1"
    assert torch.neuron.Stream() == default
    monkeypatch.delenv("NEURON_RT_ENABLE_HOST_CC")
    assert torch.neuron.Stream() == default and torch.Stream(device="neuron") == default
    assert not hasattr(torch_neuron_sim._C, "_reread_host_cc")


def test_data_assignment_across_cpu_and_neuron():
    x = torch.zeros(3)
    torch_neuronx.clear_op_tracking()
    x.data = torch.ones(3, device=D)
    assert x.device.type == "neuron" and x.cpu().tolist() == [1.0] * 3
    assert "aten::_has_compatible_shallow_copy_type" in torch_neuronx.get_executed_ops()
    p = torch.nn.Parameter(torch.ones(3, device=D))
    p.data = torch.zeros(3)  # FSDP's CPU offload
    assert p.device.type == "cpu"
    keys = str(torch._C._dispatch_keys(p))
    assert "PrivateUse1" not in keys and "CPU" in keys and "AutogradCPU" in keys
    p.data.add_(1)  # in-place ops now run on the CPU
    assert p.tolist() == [1.0] * 3


def test_a_new_thread_sees_the_process_default_device():
    seen = []
    torch_neuronx.set_device(2)
    try:
        t = threading.Thread(target=lambda: seen.append(torch_neuronx.current_device()))
        t.start()
        t.join()
        with torch.neuron.device(1):  # a context manager changes this thread only
            t = threading.Thread(target=lambda: seen.append(torch_neuronx.current_device()))
            t.start()
            t.join()
    finally:
        torch_neuronx.set_device(0)
    assert seen == [2, 2]


def test_device_index_errors_are_the_devices():
    n = torch_neuronx.device_count()
    with pytest.raises(RuntimeError, match=rf"^Device index 20 is out of range. Valid range is 0 to {n - 1} for this "
                                           r"process$"):
        torch.ones(2).to("neuron:20")
    with pytest.raises(ValueError, match=f"Invalid device id: 20. Valid range is 0 to {n - 1}"):
        torch_neuronx.set_device(20)
    with pytest.raises(ValueError, match=f"Invalid device id: 20. Valid range is 0 to {n - 1}"):
        torch.neuron.device(20).__enter__()


def test_128_devices_allowed_129_refused():
    from conftest import run_python

    code = """
        import torch, torch_neuron_sim
        print(torch.neuron.device_count(), torch.ones(2, device="neuron:127").device)
    """
    env = {"NEURON_SIM_CHIPS": "17", "NEURON_LOGICAL_NC_CONFIG": "1", "NEURON_SIM_HBM_GB": "1"}
    ok = run_python(code, env={**env, "NEURON_RT_NUM_CORES": "128"})
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.split() == ["128", "neuron:127"]
    refused = run_python(code, env={**env, "NEURON_RT_NUM_CORES": "129"})
    assert refused.returncode != 0 and "at most 128 devices" in refused.stderr


def test_more_cores_than_a_chip_are_a_multi_chip_instance():
    from conftest import run_python

    code = """
        import torch, torch_neuron_sim
        print(torch.neuron.device_count(), torch.ones(2, device="neuron:7").device, torch.neuron.get_device_properties(7))
        try:
            torch.ones(2).to("neuron:20")
        except RuntimeError as e:
            print(type(e).__name__, e)
    """
    ok = run_python(code, env={"NEURON_RT_NUM_CORES": "8", "NEURON_SIM_HBM_GB": "1"})
    assert ok.returncode == 0, ok.stderr
    lines = ok.stdout.splitlines()
    assert lines[0].startswith("8 neuron:7 <NeuronDeviceProperties(name='trn2'")
    assert lines[1] == "RuntimeError Device index 20 is out of range. Valid range is 0 to 7 for this process"
    for n in ("16", "64"):
        r = run_python("import torch, torch_neuron_sim; print(torch.neuron.device_count())",
                       env={"NEURON_RT_NUM_CORES": n, "NEURON_SIM_HBM_GB": "1"})
        assert r.returncode == 0 and r.stdout.split() == [n], r.stderr
    r = run_python("import torch, torch_neuron_sim; print(torch.neuron.device_count())",
                   env={"NEURON_RT_VISIBLE_CORES": "6-7", "NEURON_SIM_HBM_GB": "1"})
    assert r.returncode == 0 and r.stdout.split() == ["2"], r.stderr
    too_many = run_python("import torch, torch_neuron_sim; torch.neuron.device_count()",
                          env={"NEURON_RT_NUM_CORES": "65", "NEURON_SIM_HBM_GB": "1"})
    assert too_many.returncode != 0
    assert "NEURON_RT_NUM_CORES=65, but the largest trn2 instance (trn2.48xlarge, 16 chips) has 64" in too_many.stderr


def test_reserved_memory_is_what_the_device_reports():
    x = torch.empty(1000, device=D)
    assert torch.neuron.memory_allocated() >= 4000
    assert torch.neuron.memory_reserved() == 0 and torch.neuron.max_memory_reserved() == 0
    assert torch_neuronx.memory_reserved() == 0 and torch_neuronx.max_memory_reserved() == 0
    for stats in (torch.neuron.memory_stats(), torch_neuronx.memory_stats()):
        assert stats["reserved_bytes"] == {"current": 0, "peak": 0, "allocated": 0, "freed": 0}
        assert stats["allocated_bytes"]["current"] >= 4000
    assert torch_neuron_sim.memory_reserved() >= 4000  # the arena's own reservation
    assert torch_neuron_sim.memory_stats()["reserved_bytes"]["current"] >= 4000
    del x


_EVENT_KINDS = {
    "torch.neuron.Event": lambda timing: torch.neuron.Event(enable_timing=timing),
    "torch_neuronx.Event": lambda timing: torch_neuronx.Event(enable_timing=timing),
    "torch.Event": lambda timing: torch.Event("neuron", enable_timing=timing),
}


@pytest.mark.parametrize("kind", sorted(_EVENT_KINDS))
def test_elapsed_time_misuse_raises_the_devices_or_torchs_exception(kind):
    # The device's own Event class (torch.neuron.Event, torch_neuronx.Event) refuses to time an
    # event created without timing with a RuntimeError; a generic torch.Event keeps PyTorch's
    # ValueError (c10::impl::InlineEvent checks before asking the backend), as for cuda.
    make = _EVENT_KINDS[kind]
    untimed = make(False), make(False)
    for e in untimed:
        e.record()
    timed = make(True), make(True)
    devices_own = kind != "torch.Event"
    for a, b in ((untimed[0], untimed[1]), (timed[0], untimed[1]), (untimed[0], timed[0])):
        if devices_own:
            with pytest.raises(RuntimeError, match="^Event was not created with timing enabled$") as err:
                a.elapsed_time(b)
            assert type(err.value) is RuntimeError
        else:
            words = re.escape("Both events must be created with argument 'enable_timing=True'.")
            with pytest.raises(ValueError, match=words) as err:
                a.elapsed_time(b)
            assert type(err.value) is ValueError
    assert isinstance(untimed[0], torch.Event) and isinstance(untimed[0], torch.neuron.Event)
    timed[0].record()
    for a, b in ((timed[0], timed[1]), (timed[1], timed[0])):
        with pytest.raises(ValueError,
                           match=re.escape("Both events must be recorded before calculating elapsed time.")) as err:
            a.elapsed_time(b)
        assert type(err.value) is ValueError
    timed[1].record()
    other = torch.Event("neuron", enable_timing=True)  # a generic event times against every kind
    other.record()
    assert timed[0].elapsed_time(timed[1]) >= 0 and timed[0].elapsed_time(other) >= 0
    if not devices_own:  # (PyTorch's C++ method takes torch.Event itself only as its argument)
        assert other.elapsed_time(timed[0]) <= 0
