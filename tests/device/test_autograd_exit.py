"""A program whose last line ran a backward on `neuron` exits cleanly.

Autograd's device thread can still hold the finished backward when the main
thread reaches the end; freeing it later needs the GIL while Python finalizes
and the process aborts ("terminate called without an active exception").
Pinned to one core, without the atexit drain (csrc/aten/device/autograd_exit.cpp)
the race ends most runs."""

import torch

import torch_neuron_sim
from torch_neuron_sim import _C, autograd_exit

from conftest import run_python

# Both threads on one core: the device thread is preempted right after it
# wakes the caller, the moment the race needs.
LAST_LINE_BACKWARD = """
    import os
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import torch, torch_neuron_sim
    model = torch.nn.Linear(16, 4).to("neuron")
    model(torch.randn(8, 16).to("neuron")).sum().backward()
"""


def test_a_backward_as_the_last_line_exits_cleanly():
    for _ in range(6):
        out = run_python(LAST_LINE_BACKWARD, timeout=120)
        assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
        assert "terminate called" not in out.stderr


def test_the_drain_leaves_no_trace_in_ops_memory_or_the_timeline():
    device = torch.device("neuron", min(1, torch.neuron.device_count() - 1))
    model = torch.nn.Linear(16, 4).to(device)
    model(torch.randn(8, 16).to(device)).sum().backward()
    torch_neuron_sim.clear_op_tracking()
    stats = torch.neuron.memory_stats(device)
    assert _C._drain_autograd_device_threads(autograd_exit.timeout_ms()) is True
    assert torch_neuron_sim.get_executed_ops() == []
    assert torch_neuron_sim.get_fallback_ops() == []
    assert torch.neuron.memory_stats(device) == stats


def test_the_drain_runs_at_exit_and_does_nothing_without_a_backward():
    code = """
        import torch, torch_neuron_sim
        from torch_neuron_sim import _C
        assert _C._drain_autograd_device_threads(100) is True  # no device thread yet: nothing to do
        drain = _C._drain_autograd_device_threads
        def reporting_drain(timeout_ms):
            print("drained", drain(timeout_ms), timeout_ms, flush=True)
        _C._drain_autograd_device_threads = reporting_drain  # looked up when the atexit handler runs
        torch.ones(2, device="neuron", requires_grad=True).sum().backward()
        print("last line", flush=True)
    """
    out = run_python(code, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["last", "line", "drained", "True", str(autograd_exit.timeout_ms())]


def test_the_exit_drain_waits_as_long_as_the_environment_says():
    code = """
        import torch, torch_neuron_sim
        from torch_neuron_sim import _C
        _C._drain_autograd_device_threads = lambda timeout_ms: print("waits", timeout_ms, flush=True)
    """
    for value, waits in (("12345", "12345"), ("", "2000"), (" 0 ", "0")):
        out = run_python(code, env={"NEURON_SIM_EXIT_DRAIN_MS": value}, timeout=120)
        assert out.returncode == 0 and out.stdout.split() == ["waits", waits], (value, out.stdout, out.stderr[-2000:])
