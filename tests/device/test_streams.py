"""Streams and events on neuron: torch.neuron.*, torch.Stream/torch.Event and
torch.accelerator agree on the current stream; ordering, cross-stream waits,
queries and timing behave as on cuda."""
import gc
import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

import torch_neuron_sim
from conftest import run_python

N = torch.neuron
# These tests exercise several streams: multi-stream mode, as torch_neuronx's
# requires_nrt_streams (the default is one stream per device).
pytestmark = pytest.mark.usefixtures("nrt_streams")


@pytest.fixture(autouse=True)
def _restore_streams():
    yield
    for i in range(N.device_count()):
        N.set_stream(N.default_stream(i))
    N.set_device(0)


def test_default_and_current_stream():
    assert N.current_stream() == N.default_stream()
    assert N.default_stream().stream_id == 0
    assert N.default_stream(1).device == torch.device("neuron:1")
    assert isinstance(N.current_stream(), N.Stream)
    assert N.current_stream() == torch.accelerator.current_stream()


def test_new_streams_are_distinct_and_on_the_right_device():
    a, b = N.Stream(), N.Stream(device="neuron:1")
    assert a != b and a.stream_id != 0
    assert a.device == torch.device("neuron:0") and b.device == torch.device("neuron:1")
    # torch.Stream without an index means the current device, as for cuda.
    with N.device(2):
        assert torch.Stream(device="neuron").device_index == 2


def test_invalid_device_is_refused():
    with pytest.raises(ValueError, match="Invalid device id"):
        N.Stream(device=99)
    with pytest.raises(RuntimeError, match="Device index 99 is out of range"):
        torch.Stream(device="neuron:99")


def test_stream_context_sets_and_restores_stream_and_device():
    s0, s1 = N.Stream(), N.Stream(device=1)
    with N.stream(s0):
        assert N.current_stream() == s0
        with N.stream(s1):
            assert N.current_device() == 1 and N.current_stream() == s1
            assert N.current_stream(0) == s0  # other devices keep their streams
        assert N.current_device() == 0 and N.current_stream() == s0
        assert N.current_stream(1) == N.default_stream(1)
    assert N.current_stream() == N.default_stream()
    with N.stream(None):  # a no-op, as torch.cuda.stream(None)
        assert N.current_stream() == N.default_stream()


def test_set_stream_through_torch_accelerator():
    s = N.Stream(device=1)
    torch.accelerator.set_stream(s)
    assert N.current_stream(1) == s and N.current_device() == 1
    N.set_stream(N.default_stream(1))
    assert torch.accelerator.current_stream(1) == N.default_stream(1)


def test_current_stream_is_per_thread():
    s = N.Stream()
    seen = []
    with N.stream(s):
        t = threading.Thread(target=lambda: seen.append(N.current_stream()))
        t.start()
        t.join()
        assert N.current_stream() == s
    assert seen == [N.default_stream()]


def test_producer_consumer_across_streams_with_wait_stream():
    torch.manual_seed(0)
    a_cpu = torch.randn(64, 64)
    producer, consumer = N.Stream(), N.Stream()
    with N.stream(producer):
        a = a_cpu.to("neuron")
        b = a @ a
    consumer.wait_stream(producer)
    with N.stream(consumer):
        c = (b + 1).sum(0)
        b.record_stream(consumer)
    done = consumer.record_event()
    N.current_stream().wait_event(done)
    torch.testing.assert_close(c.cpu(), (a_cpu @ a_cpu + 1).sum(0))
    assert producer.query() and consumer.query() and done.query()
    producer.synchronize()
    done.synchronize()


def test_event_waits_across_devices():
    s0, s1 = N.Stream(device=0), N.Stream(device=1)
    with N.stream(s0):
        x = torch.arange(8.0, device="neuron:0") * 2
    e = N.Event()
    e.record(s0)
    s1.wait_event(e)
    with N.stream(s1):
        y = x.to("neuron:1") + 1
    N.synchronize(1)
    assert torch.equal(y.cpu(), torch.arange(8.0) * 2 + 1)


def test_event_query_and_record_semantics():
    e = N.Event()
    assert isinstance(e, N.Event) and isinstance(e, torch.Event)
    assert e.query()  # never recorded: nothing to wait for (cuda semantics)
    e.synchronize()
    s = N.Stream(device=1)
    e.record(s)
    assert e.device == torch.device("neuron:1") and e.query()
    with pytest.raises(RuntimeError, match="does not match recording stream"):
        e.record(N.Stream(device=0))  # an event belongs to the device it was first recorded on


def test_elapsed_time_is_ordered_and_additive():
    e1, e2, e3 = (N.Event(enable_timing=True) for _ in range(3))
    x = torch.randn(256, 256, device="neuron")
    e1.record()
    for _ in range(5):
        x = torch.tanh(x @ x)
    e2.record()
    x = x + 1
    e3.record()
    t12, t23, t13 = e1.elapsed_time(e2), e2.elapsed_time(e3), e1.elapsed_time(e3)
    assert t12 > 0 and t23 > 0
    assert t13 >= t12 and t13 == pytest.approx(t12 + t23, rel=1e-6, abs=1e-6)
    assert e2.elapsed_time(e1) == pytest.approx(-t12)


def test_elapsed_time_errors():
    with pytest.raises(RuntimeError, match="^Event was not created with timing enabled$"):  # the device's words
        a, b = N.Event(), N.Event()
        a.record()
        b.record()
        a.elapsed_time(b)
    with pytest.raises(ValueError, match="enable_timing=True"):  # a generic torch.Event: PyTorch's
        a, b = torch.Event("neuron"), torch.Event("neuron")
        a.record()
        b.record()
        a.elapsed_time(b)
    with pytest.raises(ValueError, match="must be recorded"):
        N.Event(enable_timing=True).elapsed_time(N.Event(enable_timing=True))
    a, b = N.Event(enable_timing=True), N.Event(enable_timing=True)
    a.record(N.Stream(device=0))
    b.record(N.Stream(device=1))
    with pytest.raises(RuntimeError, match="different devices"):
        a.elapsed_time(b)
    with pytest.raises(NotImplementedError, match="interprocess"):
        N.Event(interprocess=True)


def test_module_level_stream_functions():
    s = N.Stream()
    with N.stream(s):
        e = N.record_event()
        assert isinstance(e, N.Event)
        N.wait_event(e)
        N.wait_stream(N.default_stream())
        assert N.query()
    N.synchronize()
    N.synchronize(1)
    assert torch_neuron_sim.current_stream() == N.default_stream()


def test_record_stream_frees_when_the_tensor_dies():
    # Kernels complete at launch, so no stream still uses the block when the
    # tensor dies: the memory returns at once (cuda would wait for the stream).
    s = N.Stream()
    gc.collect()  # earlier tests' cyclic garbage must not be freed between the two readings
    before = N.memory_allocated()
    x = torch.empty(1 << 20, device="neuron")
    with N.stream(s):
        x.mul_(0)
    x.record_stream(s)
    assert N.memory_allocated() >= before + (4 << 20)
    del x
    assert N.memory_allocated() == before
    with pytest.raises(RuntimeError, match="neuron stream"):
        torch.ones(2, device="neuron").record_stream(torch.Stream(device="cpu"))


def test_launch_blocking_default_and_override():
    code = textwrap.dedent("""
        import os, torch, torch_neuron_sim
        x = torch.ones(3, device="neuron") * 2
        print(os.environ["NEURON_LAUNCH_BLOCKING"], torch_neuron_sim.streams.launch_blocking(), x.sum().item())
    """)
    env = {k: v for k, v in os.environ.items() if k != "NEURON_LAUNCH_BLOCKING"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "True", "6.0"]  # set on import when unset, as torch_neuronx does
    r = run_python(code, env={"NEURON_LAUNCH_BLOCKING": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "False", "6.0"]  # a user's choice is kept


def test_backward_on_a_side_stream_of_another_device():
    # Autograd's device threads switch devices and streams through the guard.
    torch.manual_seed(0)
    ref = torch.nn.Linear(8, 8)
    lin = torch.nn.Linear(8, 8).to("neuron:1")
    lin.load_state_dict(ref.state_dict())
    x_cpu = torch.randn(4, 8, requires_grad=True)
    x = x_cpu.detach().to("neuron:1").requires_grad_()
    s = N.Stream(device=1)
    with N.stream(s):
        lin(x).tanh().sum().backward()
    ref(x_cpu).tanh().sum().backward()
    N.current_stream(1).wait_stream(s)
    torch.testing.assert_close(x.grad.cpu(), x_cpu.grad)
    torch.testing.assert_close(lin.weight.grad.cpu(), ref.weight.grad)
    assert N.current_stream(1) == N.default_stream(1)  # the context restored the stream
