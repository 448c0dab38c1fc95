"""Pinned host memory for neuron: pin_memory()/is_pinned(), pinned factories,
DataLoader(pin_memory=True) with and without worker processes, and
non_blocking copies between pinned host memory and the device."""
import warnings

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

N = torch.neuron


def test_pin_memory_makes_a_pinned_copy():
    x = torch.arange(10.0)
    p = x.pin_memory()
    assert p.is_pinned() and not x.is_pinned()
    assert p.data_ptr() != x.data_ptr() and torch.equal(p, x)
    assert p.pin_memory().data_ptr() == p.data_ptr()  # already pinned: returned as is
    assert p[3:].is_pinned()  # a view of pinned memory is pinned
    inner = p.untyped_storage()[8:]  # so is a storage that starts inside a pinned block
    assert inner.is_pinned() and torch.empty(0).set_(inner, 0, (2,), (1,)).is_pinned()
    assert torch.empty(4, pin_memory=True).is_pinned()
    assert torch.zeros(2, 3, pin_memory=True).is_pinned()
    del p  # freeing pinned memory forgets it
    assert not torch.empty(4).is_pinned()


def test_deprecated_device_argument_still_works():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert torch.ones(3).pin_memory("neuron").is_pinned("neuron")


def test_neuron_tensors_are_not_pinned():
    assert not torch.ones(3, device="neuron").is_pinned()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_non_blocking_copies_from_and_to_pinned_memory(dtype):
    src = (torch.arange(4096) % 7).to(dtype).pin_memory()
    original = src.clone()
    dev = src.to("neuron:1", non_blocking=True)
    done = N.Event()
    done.record(N.current_stream(1))
    done.synchronize()
    assert dev.device == torch.device("neuron:1") and torch.equal(dev.cpu(), src)
    src.zero_()  # after the copy completed, the source may be reused
    assert torch.equal(dev.cpu(), original)
    back = dev.to("cpu", non_blocking=True)
    N.synchronize(1)
    assert back.is_pinned()  # as on cuda: a non_blocking device-to-host copy lands in pinned memory
    assert torch.equal(back, dev.cpu())
    into = torch.empty_like(back).pin_memory()
    into.copy_(dev, non_blocking=True)
    N.synchronize()
    assert torch.equal(into, back)


def test_non_blocking_copy_on_a_side_stream():
    src = torch.randn(256, 256).pin_memory()
    s = N.Stream()
    with N.stream(s):
        dev = src.to("neuron", non_blocking=True)
        out = dev @ dev
    N.current_stream().wait_stream(s)
    torch.testing.assert_close(out.cpu(), src @ src)


def _dataset():
    return TensorDataset(torch.arange(64.0).view(32, 2), torch.arange(32))


@pytest.mark.parametrize("workers, context", [(0, None), (2, "fork"), (1, "spawn")])
def test_dataloader_pins_batches(workers, context):
    with warnings.catch_warnings():
        # torch deprecates pin_memory_device (it pins for the current accelerator, which is neuron)
        warnings.simplefilter("ignore", UserWarning)
        loader = DataLoader(_dataset(), batch_size=8, pin_memory=True, pin_memory_device="neuron",
                            num_workers=workers, multiprocessing_context=context)
        seen = []
        for x, y in loader:
            assert x.is_pinned() and y.is_pinned()
            xd, yd = x.to("neuron", non_blocking=True), y.to("neuron", non_blocking=True)
            seen.append((xd.sum() + yd.sum()).item())
    N.synchronize()
    ds = _dataset()
    expected = [(ds.tensors[0][i:i + 8].sum() + ds.tensors[1][i:i + 8].sum()).item() for i in range(0, 32, 8)]
    assert seen == expected
