"""torch_neuronx internals its test helpers and tests call or patch: the helpers'
internals, the `_nrt_copy_*` entry points host bounces go through (replaced and
restored by assignment, as count_cpu_bounce_calls does), casts that bounce only for
64 bits, torch_neuronx.utils, and the device's own registered kernels."""
import torch

import torch_neuron_sim
from torch_neuronx_user import D, torch_neuronx, COPY_ENTRIES, copy_entry_points_restored, neuronx_alias  # noqa: F401 (fixtures)


def test_internals_used_by_the_devices_test_helpers(plain_arena):
    g = torch_neuronx._C._get_default_generator(0)
    assert isinstance(g, torch.Generator) and g.device == torch.device("neuron:0")
    assert torch_neuronx._C._get_default_generator(1).device == torch.device("neuron:1")
    stats = torch_neuronx._C._get_compilation_cache_stats()
    assert {"total_entries", "cache_hits", "cache_misses", "hit_rate"} <= set(stats)
    # The allocator keeps no freed block (it returns to the arena at once): no cached
    # blocks to count, and what was reserved for a tensor is released with it.
    allocator = torch_neuronx._C.NeuronCachingAllocator  # the arena's own reservation (torch.neuron reports 0)
    reserved = torch_neuron_sim.memory_reserved(0)
    x = torch.empty(1 << 20, device="neuron:0")
    assert torch_neuron_sim.memory_reserved(0) == reserved + (4 << 20)
    del x
    assert torch_neuron_sim.memory_reserved(0) == reserved and allocator.getCachedBlocks() == 0
    allocator.emptyCache()
    assert torch_neuron_sim.memory_reserved(0) == reserved


def test_host_bounces_go_through_the_nrt_copy_entry_points():
    from unittest import mock

    c = torch_neuronx._C
    with mock.patch.object(c, "_nrt_copy_cpu_to_neuron_tensor", wraps=c._nrt_copy_cpu_to_neuron_tensor) as w, \
            mock.patch.object(c, "_nrt_copy_neuron_to_cpu_tensor", wraps=c._nrt_copy_neuron_to_cpu_tensor) as r:
        x = torch.arange(6.0).to(D)
        y = (x * 2).cpu()
    assert y.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert w.call_count == 1 and r.call_count == 1
    assert torch.arange(3.0).to(D).cpu().tolist() == [0.0, 1.0, 2.0]  # unpatched again


def _bounces(fn):
    # torch_neuronx's count_cpu_bounce_calls: replace the entry points on the submodule, count, restore.
    import torch_neuronx._C as C

    counts = {"reads": 0, "writes": 0}
    read, write = C._nrt_copy_neuron_to_cpu_tensor, C._nrt_copy_cpu_to_neuron_tensor

    def counted(kind, entry):
        def wrapper(*args, **kwargs):
            counts[kind] += 1
            return entry(*args, **kwargs)
        return wrapper

    C._nrt_copy_neuron_to_cpu_tensor, C._nrt_copy_cpu_to_neuron_tensor = counted("reads", read), counted("writes", write)
    try:
        fn()
    finally:
        C._nrt_copy_neuron_to_cpu_tensor, C._nrt_copy_cpu_to_neuron_tensor = read, write
    return counts


def test_bounce_counting_by_replacing_the_entry_points_as_the_device_helpers_do():
    # torch_neuronx's count_cpu_bounce_calls imports the submodule and assigns wrappers to it (_bounces, below).
    a = torch.randn(4, 3, device=D)
    out = {}
    assert _bounces(lambda: out.update(b=a + a)) == {"reads": 0, "writes": 0}  # native: no host bounce
    assert _bounces(lambda: torch.trace(a)) == {"reads": 1, "writes": 1}  # a fallback: the input out, the result back
    torch.testing.assert_close(out["b"].cpu(), 2 * a.cpu())


def test_entry_points_restored_by_assignment_stop_routing_copies():
    # count_cpu_bounce_calls restores the originals by assignment (_bounces, below): copies
    # then run directly again, without calling into Python.
    from unittest import mock

    assert _bounces(lambda: torch.arange(3.0).to(D).cpu()) == {"reads": 1, "writes": 1}
    assert not any(n in vars(torch_neuronx._C) for n in COPY_ENTRIES)
    core = torch_neuron_sim._C  # what the entry points call to copy
    with mock.patch.object(core, "_nrt_copy", wraps=core._nrt_copy) as direct:
        assert torch.arange(3.0).to(D).cpu().tolist() == [0.0, 1.0, 2.0]
    assert direct.call_count == 0
    with mock.patch.object(torch_neuronx._C, "_nrt_copy_cpu_to_neuron_tensor",
                           wraps=torch_neuronx._C._nrt_copy_cpu_to_neuron_tensor) as write:
        torch.arange(3.0).to(D)
        del torch_neuronx._C._nrt_copy_cpu_to_neuron_tensor  # a deleted replacement restores the original too
        torch.arange(3.0).to(D)
    assert write.call_count == 1 and "_nrt_copy_cpu_to_neuron_tensor" not in vars(torch_neuronx._C)


def test_torch_neuronx_utils_helpers():
    from torch_neuronx.utils import (
        get_neuron_registered_ops, get_platform_target, is_sync_mode_enabled, suppress_specific_warnings,
        use_mlir_aten_ops,
    )
    import warnings

    assert get_platform_target() == torch_neuronx.get_device_properties(0).name
    import os

    assert is_sync_mode_enabled() == (os.environ["NEURON_LAUNCH_BLOCKING"] == "1")  # "1" unless set otherwise
    assert use_mlir_aten_ops() is True  # torch_neuronx's import default
    ops = get_neuron_registered_ops(as_sorted=True, keep_variant=True)
    assert ops == sorted(ops) and {"add.Tensor", "linear", "empty.memory_format", "argsort.stable"} <= set(ops)
    assert "softmax.int" not in ops  # decomposed by PyTorch before the device sees it
    assert "add" in get_neuron_registered_ops()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        shown = []
        saved = warnings.showwarning
        warnings.showwarning = lambda *a, **k: shown.append(str(a[0]))
        try:
            with suppress_specific_warnings(["noisy"]):
                warnings.warn("a noisy warning")
                warnings.warn("a useful warning")
        finally:
            warnings.showwarning = saved
    assert shown == ["a useful warning"]


def test_device_casts_bounce_through_the_host_only_for_64_bits():
    x = torch.randn(16, 16, device=D)
    out = {}
    assert _bounces(lambda: out.update(h=x.to(dtype=torch.float16))) == {"reads": 0, "writes": 0}
    assert out["h"].device.type == "neuron" and out["h"].dtype == torch.float16
    assert _bounces(lambda: out.update(d=x.to(dtype=torch.float64))) == {"reads": 1, "writes": 1}
    assert out["d"].device.type == "neuron" and torch.equal(out["d"].cpu(), x.cpu().double())
    assert _bounces(lambda: out["d"].t().contiguous()) == {"reads": 0, "writes": 0}  # no cast, no bounce
    from unittest import mock

    with mock.patch("torch_neuronx._C._nrt_copy_neuron_to_cpu_tensor",
                    wraps=torch_neuronx._C._nrt_copy_neuron_to_cpu_tensor) as read:
        x.to(dtype=torch.int64)
    assert read.call_count == 1


def test_device_internals_tests_patch():
    from unittest import mock

    from torch_neuronx import neuron

    assert torch_neuronx._C._vnc_count() == torch_neuronx.device_count() >= 1
    props = torch_neuronx._C._neuron_getDeviceProperties(0)
    assert (props.name, props.total_memory) == (torch.neuron.get_device_properties(0).name,
                                               torch.neuron.get_device_properties(0).total_memory)
    for arg, expected in ((1, 1), (0, 0), (torch.device("neuron:2"), 2), (None, 3)):
        with mock.patch("torch_neuronx.set_device") as set_device, \
                mock.patch("torch_neuronx.neuron.current_device", return_value=3):
            neuron.set_device(arg)
        set_device.assert_called_once_with(expected)
    fake = mock.MagicMock(total_memory=0)
    with mock.patch("torch_neuronx._C._neuron_getDeviceProperties", return_value=fake) as get, \
            mock.patch("torch_neuronx.neuron.current_device", return_value=0):
        assert neuron.get_device_properties().total_memory == 0
        assert neuron.get_device_properties("neuron:1").total_memory == 0
    assert get.call_args_list == [mock.call(0), mock.call(1)]
    with mock.patch("torch_neuronx._C._neuron_setDevice") as low:
        torch_neuronx.set_device(1)
    low.assert_called_once_with(1)
    assert torch_neuronx.current_device() == 0  # the patched call did nothing


def test_registered_ops_include_the_devices_own_kernels():
    from torch_neuronx.utils import get_neuron_registered_ops

    ops = get_neuron_registered_ops()
    # its C++ and Python registrations (contiguous, _to_copy), and ops PyTorch has no CPU kernel for
    assert {"contiguous", "_to_copy", "clone", "convolution", "linear_backward", "batch_norm_backward_reduce"} <= ops
    assert "softmax.int" not in get_neuron_registered_ops(keep_variant=True)
