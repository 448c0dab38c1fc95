"""out= arguments as the device writes them: index_copy broadcasts its source, add
into a non-contiguous out= is the device's refusal, other out= ops write through strides."""
import pytest
import torch

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
    # add_ on a view writes through its strides, as on the CPU; add(out=) into a
    # non-contiguous tensor is refused with the device's fallback error (the out tensor
    # untouched), or under TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1 with the
    # disabled-fallback error.
    ac = torch.randn(4, 3)
    a = ac.to(D)
    for view in (lambda t: t[:, :3], lambda t: t.t()[:3].t()):
        yc, y = torch.zeros(4, 4), torch.zeros(4, 4, device=D)
        with track_neuron_ops() as ops:
            view(y).add_(a, alpha=2)
            view(y).add_(1)
        view(yc).add_(ac, alpha=2)
        view(yc).add_(1)
        assert torch.equal(y.cpu(), yc)
        assert "aten::add_.Tensor" in ops.executed and ops.fallback == []
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
