"""Importing the package makes `neuron` a PyTorch device like cuda."""
import pytest
import torch

import torch_neuron_sim
from conftest import run_python


def test_privateuse1_is_renamed_and_module_registered():
    assert torch._C._get_privateuse1_backend_name() == "neuron"
    assert torch.neuron is torch_neuron_sim.neuron
    assert torch.neuron.is_available()
    assert torch.neuron.device_count() == 4  # trn2 at LNC=2: 4 logical cores


def test_generated_methods():
    t = torch.ones(2).neuron()
    assert t.is_neuron and t.device == torch.device("neuron", 0)
    assert not torch.ones(1).is_neuron
    m = torch.nn.Linear(2, 2).neuron()
    assert all(p.device.type == "neuron" for p in m.parameters())
    s = torch.ones(3).untyped_storage().neuron()
    assert s.device.type == "neuron" and s.is_neuron
    assert torch.ones(2).neuron(1).device == torch.device("neuron:1")


def test_accelerator_api():
    acc = torch.accelerator
    assert acc.current_accelerator() == torch.device("neuron")
    assert acc.is_available() and acc.device_count() == 4
    acc.set_device_index(1)
    try:
        assert acc.current_device_index() == 1
        assert torch.ones(1, device="neuron").device.index == 1
    finally:
        acc.set_device_index(0)
    before = acc.memory_allocated(0)
    x = torch.empty(1000, device="neuron")
    assert acc.memory_allocated(0) == before + 4096  # 4000 B in its size class
    assert acc.max_memory_allocated(0) >= before + 4096
    assert acc.memory_reserved(0) >= acc.memory_allocated(0)
    del x
    assert acc.memory_allocated(0) == before
    acc.reset_peak_memory_stats(0)
    assert acc.max_memory_allocated(0) == before


def test_accelerator_synchronize_reaches_the_device(nrt_streams):
    """torch.accelerator.synchronize() is the device's synchronize: after it,
    a tensor written on one stream may be read on another (the stream-order
    checker reports that read without it, tests/device/test_stream_check.py), and
    a device that does not exist is an error naming the valid ones."""
    from torch_neuron_sim.devices.stream_check import StreamOrderError, check_stream_order

    n = torch.neuron
    a, b = n.Stream(), n.Stream()
    try:
        with check_stream_order():
            with n.stream(a):
                x = torch.ones(64, device="neuron") * 2
            with pytest.raises(StreamOrderError):
                with n.stream(b):
                    x + 1
            torch.accelerator.synchronize()
            with n.stream(b):
                y = x + 1
            n.current_stream().wait_stream(b)
        assert torch.equal(y.cpu(), torch.full((64,), 3.0))
    finally:
        n.set_stream(n.default_stream())
    with pytest.raises(RuntimeError, match="Device index 9 is out of range. Valid range is 0 to 3"):
        torch.accelerator.synchronize(9)  # (the device is initialised: torch skips devices that are not)


def test_accelerator_empty_cache_gives_free_pages_back(plain_arena):
    """torch.accelerator.empty_cache() reaches the device allocator: the pages
    a freed tensor had touched go back to the host (RSS falls by them)."""
    def rss():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))
    mib = 1 << 20
    x = torch.empty(64 * mib, dtype=torch.uint8, device="neuron")
    x.fill_(1)
    del x
    touched = rss()
    torch.accelerator.empty_cache()
    assert touched - rss() >= 48 * mib


def test_torch_neuron_mirrors_accelerator_memory():
    x = torch.empty(256, device="neuron")
    assert torch.neuron.memory_allocated() == torch.accelerator.memory_allocated(0)
    assert torch.neuron.max_memory_allocated() == torch.accelerator.max_memory_allocated(0)
    assert torch_neuron_sim.memory_reserved() == torch.accelerator.memory_reserved(0)  # the caching allocator's
    del x


def test_device_context_and_current_device():
    with torch.neuron.device(2):
        assert torch.neuron.current_device() == 2
        assert torch.empty(1, device="neuron").device.index == 2
    assert torch.neuron.current_device() == 0
    assert torch.neuron.get_device_name(1) == "neuron:1"
    props = torch.neuron.get_device_properties(0)
    assert props.name == "trn2" and props.total_memory == 24 * 2**30
    assert "NeuronDeviceProperties(name='trn2'" in repr(props)


def test_import_torch_alone_autoloads_the_backend():
    r = run_python("""
        import torch
        x = torch.randn(3, 3).to("neuron")
        print(x.device, torch.neuron.device_count(), (x @ x).device)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["neuron:0", "4", "neuron:0"]
