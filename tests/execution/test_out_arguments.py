"""out= arguments and in-place outputs as the device writes them: index_copy broadcasts its
source, add into a non-contiguous out= is the device's refusal, other out= ops write through
strides, native in-place ops into a non-contiguous view fall back, circular padding copies on
the device."""
import re

import pytest
import torch
import torch.nn.functional as F

import torch_neuron_sim
from torch_neuron_sim.testing import track_neuron_ops
from torch_neuronx_user import D, torch_neuronx, copy_entry_points_restored, neuronx_alias  # noqa: F401 (fixtures)


def test_index_copy_broadcasts_the_source_as_the_device_does():
    idx = torch.tensor([0, 2])
    rows = [[1.0] * 3, [0.0] * 3, [1.0] * 3, [0.0] * 3, [0.0] * 3]
    for source in (torch.ones(1, 3), torch.ones(3), torch.tensor(1.0)):
        with pytest.raises(IndexError, match=r"index_copy_\(\)"):
            torch.zeros(5, 3).index_copy(0, idx, source)  # the CPU wants the slices' exact shape
        src = source.to(D)
        for name, run in (
            ("aten::index_copy", lambda: torch.zeros(5, 3, device=D).index_copy(0, idx.to(D), src)),
            ("aten::index_copy_", lambda: torch.zeros(5, 3, device=D).index_copy_(0, idx.to(D), src)),
            ("aten::index_copy.out", lambda: torch.index_copy(torch.zeros(5, 3, device=D), 0, idx.to(D), src,
                                                              out=torch.empty(5, 3, device=D))),
        ):
            with track_neuron_ops() as ops:
                got = run()
            assert got.cpu().tolist() == rows, (name, tuple(source.shape))
            assert name in ops.executed and ops.fallback == [], (name, ops.executed, ops.fallback)
    y = torch.zeros(5, 3, device=D)
    y.index_copy_(1, torch.tensor([1], device=D), torch.full((5, 1), 2.0, device=D))  # the exact shape still works
    assert y.cpu()[:, 1].tolist() == [2.0] * 5
    with pytest.raises(RuntimeError, match="Source/destination tensor must have same slice shapes"):
        y.index_copy_(0, idx.to(D), torch.ones(2, 2, device=D))  # does not broadcast: refused, in the CPU's words
    assert y.cpu()[:, 1].tolist() == [2.0] * 5 and y.cpu()[:, 0].eq(0).all()  # left as it was


def test_in_place_add_into_non_contiguous_tensors():
    # The device's kernels write contiguous outputs only: add_ on a non-contiguous view is not
    # native, it falls back to the CPU (recorded as a fallback) and writes through the view's
    # strides; add(out=) into a non-contiguous tensor is refused with the device's fallback
    # error (the out tensor untouched), or under TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1
    # with the disabled-fallback error.
    ac = torch.randn(4, 3)
    a = ac.to(D)
    for view in (lambda t: t[:, :3], lambda t: t.t()[:3].t(), lambda t: t[:, 3]):
        yc, y = torch.zeros(4, 4), torch.zeros(4, 4, device=D)
        other = ac if view(yc).dim() == 2 else ac[:, 0]
        with track_neuron_ops() as ops:
            view(y).add_(other.to(D), alpha=2)
            view(y).add_(1)
        view(yc).add_(other, alpha=2)
        view(yc).add_(1)
        assert torch.equal(y.cpu(), yc)
        assert ops.fallback == ["aten::add_.Tensor"] and "aten::add_.Tensor" not in ops.executed
    b = a.clone()
    with track_neuron_ops() as ops:
        b.add_(1)  # a contiguous output stays native
    assert ops.executed == ["aten::add_.Tensor"] and ops.fallback == []
    out = torch.zeros(4, 4, device=D)
    with pytest.raises(RuntimeError, match="^CPU fallback failed. Cannot copy result to output tensor which is not "
                                           "contiguous"):
        torch.add(a, a, out=out[:, :3])
    torch_neuron_sim.tracking.set_fallback_only_for_unimplemented(True)
    try:
        with pytest.raises(RuntimeError, match="^CPU fallback disabled because TORCH_NEURONX_FALLBACK_ONLY_FOR_"
                                               r"UNIMPLEMENTED_OPS=1. Operation aten::add.out failed to execute on "
                                               r"Neuron \(last implementation: EmulatorKernel\)"):
            torch.add(a, 1, out=out[:, :3])
    finally:
        torch_neuron_sim.tracking.set_fallback_only_for_unimplemented(False)
    assert out.cpu().eq(0).all()
    torch.add(a, 1, out=out[:, :3].contiguous())  # the process goes on


@pytest.mark.parametrize("call", [
    lambda a, out: torch.mul(a, a, out=out),            # native
    lambda a, out: torch.mm(a, a.t()[:, :3], out=out),   # native, with a fast path for its out=
    lambda a, out: torch.maximum(a, a, out=out),        # a fallback op
    lambda a, out: torch.deg2rad(a.t(), out=out.t()),   # a composite, through mul.out
])
def test_other_out_ops_write_through_non_contiguous_tensors(call):
    # add.out's refusal is the device's for that op only (device_checks.cpp): the others
    # write through strides as on the CPU, as PyTorch's composites rely on.
    ac = torch.randn(4, 3)
    outc, out = torch.zeros(4, 4), torch.zeros(4, 4, device=D)
    call(ac, outc[:, :3])
    call(ac.to(D), out[:, :3])
    assert torch.equal(out.cpu(), outc)


_IN_PLACE = {  # base name -> the call on a view of a (4, 5) float tensor, and the device's words
    "aten::add_": (lambda v: v.add_(2), "Cannot add non-contiguous tensor"),
    "aten::mul_": (lambda v: v.mul_(torch.full_like(v, 3.0)), "Cannot process non-contiguous tensor"),
    "aten::fill_": (lambda v: v.fill_(5.0), "Cannot process non-contiguous tensor"),
    "aten::zero_": (lambda v: v.zero_(), "Cannot process non-contiguous tensor"),
    "aten::masked_fill_": (lambda v: v.masked_fill_(v > 0, -1.0), "Cannot process non-contiguous tensor"),
    "aten::index_copy_": (lambda v: v.index_copy_(0, torch.tensor([1, 3], device=v.device),
                                                  torch.full((2,), 7.0, device=v.device)),
                          "Cannot process non-contiguous tensor"),
}


@pytest.mark.parametrize("base", sorted(_IN_PLACE))
def test_native_in_place_ops_on_a_non_contiguous_output_fall_back(base):
    # m[:, 3] is a non-contiguous view: the device's in-place kernel cannot write it, so by
    # default the op falls back to the CPU (recorded) and writes through the view as the CPU
    # does; under TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1 it raises the device's
    # error and leaves the tensor as it was.
    run, words = _IN_PLACE[base]
    mc = torch.randn(4, 5)
    m = mc.to(D)
    with track_neuron_ops() as ops:
        run(m[:, 3])
    run(mc[:, 3])
    assert torch.equal(m.cpu(), mc)
    assert len(ops.fallback) == 1 and ops.fallback[0].startswith(base), ops.fallback
    assert not any(name.startswith(base) for name in ops.executed), ops.executed
    torch_neuron_sim.tracking.set_fallback_only_for_unimplemented(True)
    try:
        with pytest.raises(RuntimeError, match=r"^CPU fallback disabled because TORCH_NEURONX_FALLBACK_ONLY_FOR_"
                                               rf"UNIMPLEMENTED_OPS=1\. Operation {re.escape(base)}.* {words}"):
            run(m[:, 3])
    finally:
        torch_neuron_sim.tracking.set_fallback_only_for_unimplemented(False)
    assert torch.equal(m.cpu(), mc)  # untouched
    row = m[1]  # a contiguous view stays native
    with track_neuron_ops() as ops:
        run(row)
    run(mc[1])
    assert torch.equal(m.cpu(), mc) and ops.fallback == []


def test_in_place_op_on_an_overlapping_view_keeps_the_cpus_error():
    m = torch.zeros(3, device=D).expand(4, 3)  # not contiguous, and its elements overlap
    with pytest.raises(RuntimeError, match="unsupported operation: more than one element of the written-to tensor"):
        m.add_(1)
    assert torch.zeros(3, device=D).add_(1).cpu().tolist() == [1.0] * 3  # the process goes on


def test_circular_padding_copies_on_the_device():
    # F.pad(mode="circular") is a composite: a new_empty output filled by copy_ calls into its
    # slices, which run on the device (recorded "aten::copy_", as TorchNeuron's tests check).
    for shape, pad in (((1, 2, 5), (2, 1)), ((1, 2, 4, 4), (1, 1, 1, 1)), ((1, 1, 3, 3, 3), (1, 0, 0, 1, 1, 1))):
        x = torch.randn(*shape)
        with track_neuron_ops() as ops:
            got = F.pad(x.to(D), pad, mode="circular")
        assert torch.equal(got.cpu(), F.pad(x, pad, mode="circular")), shape
        assert "aten::copy_" in ops.executed and ops.fallback == [], (ops.executed, ops.fallback)
    a, b = torch.randn(3, device=D), torch.empty(3, device=D)
    with track_neuron_ops() as ops:
        b.copy_(a)  # device to device: the device's copy_
        b.copy_(torch.ones(3))  # host to device: a transfer, no op
        torch.ones(3).copy_(a)
    assert ops.executed.count("aten::copy_") == 1 and ops.fallback == []


def test_index_copy_of_an_empty_input_takes_a_broadcastable_source():
    # Nothing to write: the device accepts any source that broadcasts to the (empty) slices,
    # in place and out of place, where the CPU wants their exact shape.
    idx = torch.tensor([], dtype=torch.long)
    for shape, source in (((0,), torch.tensor(1.0)), ((0,), torch.ones(1)), ((0, 3), torch.ones(3)),
                          ((0, 3), torch.ones(1, 3)), ((0, 3), torch.tensor(2.0))):
        with pytest.raises(IndexError, match=r"index_copy_\(\)"):
            torch.zeros(shape).index_copy(0, idx, source)
        for run in (lambda s: torch.zeros(shape, device=D).index_copy(0, idx.to(D), s),
                    lambda s: torch.zeros(shape, device=D).index_copy_(0, idx.to(D), s),
                    lambda s: torch.index_copy(torch.zeros(shape, device=D), 0, idx.to(D), s,
                                               out=torch.empty(shape, device=D))):
            got = run(source.to(D))
            assert got.shape == shape and got.device.type == "neuron"
    with pytest.raises(IndexError, match=r"Number of indices \(0\) should be equal to source.size\(dim\) \(5\)"):
        torch.zeros(0, device=D).index_copy_(0, idx.to(D), torch.ones(5, device=D))  # does not broadcast
