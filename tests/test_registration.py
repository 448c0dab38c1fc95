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
    assert acc.memory_allocated(0) == before + 4000
    assert acc.max_memory_allocated(0) >= before + 4000
    assert acc.memory_reserved(0) >= acc.memory_allocated(0)
    del x
    assert acc.memory_allocated(0) == before
    acc.reset_peak_memory_stats(0)
    assert acc.max_memory_allocated(0) == before
    acc.synchronize()
    acc.empty_cache()


def test_torch_neuron_mirrors_accelerator_memory():
    x = torch.empty(256, device="neuron")
    assert torch.neuron.memory_allocated() == torch.accelerator.memory_allocated(0)
    assert torch.neuron.max_memory_allocated() == torch.accelerator.max_memory_allocated(0)
    assert torch_neuron_sim.memory_reserved() == torch.accelerator.memory_reserved(0)  # the arena's
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
