"""Where the device's errors differ from the CPU's, the emulator raises the device's
type and words: mixed-device inputs, dtype leniencies, shape and argument errors,
out-of-bounds indices, attention it refuses, and fallback disabled for implemented ops."""
import pytest
import torch
import torch.nn.functional as F

import torch_neuron_sim
from torch_neuronx_user import D, torch_neuronx, copy_entry_points_restored, neuronx_alias  # noqa: F401 (fixtures)


def test_mixed_device_inputs_raise_the_device_message():
    a = torch.ones(3, device=D)
    c = torch.ones(3)
    with pytest.raises(RuntimeError, match="^Non-scalar tensor arg1 is on cpu device, expected neuron"):
        a + c
    with pytest.raises(RuntimeError, match=r"Non-scalar tensor arg0\[2\] is on cpu device, expected neuron"):
        torch.cat((a, a, c))
    with pytest.raises(RuntimeError, match="Non-scalar tensor kwarg 'out' is on cpudevice, expected neuron"):
        torch.mul(a, a, out=torch.empty(3))
    with pytest.raises(RuntimeError, match="Non-scalar tensor arg2 is on cpu device, expected neuron"):
        torch.index_select(a, 0, torch.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but found at least two "
                                           "devices, neuron:0 and cpu!"):
        torch.eq(a, c)
    # Allowed: 0-dim CPU tensors, Python scalars, CPU indices for x[idx].
    assert (a + torch.tensor(2.0)).cpu().tolist() == [3.0] * 3
    assert (a * 3).cpu().tolist() == [3.0] * 3
    assert a[torch.tensor([0, 2])].cpu().tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="Inconsistent device IDs found in kernel inputs: expected device 0 but "
                                           "found device 1"):
        a + torch.ones(3, device="neuron:1")
    assert (a + a).cpu().tolist() == [2.0] * 3  # the process stays usable


def test_dtype_leniencies_of_the_device():
    x = torch.randn(2, 5, dtype=torch.float16)
    y = torch._softmax(x.to(D), 1, True)  # the CPU refuses half_to_float
    assert y.dtype == torch.float32
    torch.testing.assert_close(y.cpu(), torch.softmax(x.float(), 1), rtol=1e-3, atol=1e-3)
    assert torch._log_softmax(x.to(D), 1, True).dtype == torch.float32


def test_errors_with_the_devices_types_and_messages():
    a = torch.randn(4, 3, device=D)
    with pytest.raises(TypeError, match=r"index_select\(\): Expected dtype int32 or int64 for index"):
        torch.index_select(a, 0, torch.tensor([0.0, 1.0], device=D))
    with pytest.raises(IndexError, match=r"index_select\(\): Index is supposed to be a vector"):
        torch.index_select(a, 0, torch.zeros(2, 2, dtype=torch.long, device=D))
    with pytest.raises(RuntimeError, match="one_hot is only applicable to index tensor of dtype int64, got "
                                           "torch.int32"):
        F.one_hot(torch.tensor([0, 1], dtype=torch.int32, device=D), 3)
    with pytest.raises(TypeError, match="Expected the dtype for input and out to match, but got torch.int32 for "
                                        "input's dtype and torch.float32 for out's dtype."):
        torch.amax(torch.ones(3, dtype=torch.int32, device=D), 0, out=torch.empty((), device=D))
    with pytest.raises(RuntimeError, match="nonzero: Expected out tensor to have scalar type Long but got scalar "
                                           "typeFloat"):
        torch.nonzero(a, out=torch.empty(0, device=D))
    with pytest.raises(RuntimeError, match="torch.histogram: input tensor and hist tensor should have the same "
                                           "dtype, but got input torch.float32 and hist torch.int32"):
        torch.histc(a, 4, out=torch.empty(4, dtype=torch.int32, device=D))
    with pytest.raises(RuntimeError, match="set_: expected neuron source tensor, but got tensor on device cpu"):
        torch.empty(0, device=D).set_(torch.ones(3))
    cl = torch.empty(1, 2, 3, 3, device=D, memory_format=torch.channels_last)  # allocation works
    assert cl.is_contiguous(memory_format=torch.channels_last)
    assert cl.clone().is_contiguous()  # a clone without a format is contiguous (channels-last: section 9)
    with pytest.raises(RuntimeError, match="_copy_from_and_resize now only support copy with same size"):
        torch.cumprod(a, 0, out=torch.empty(2, device=D))  # the fallback does not resize a wrong out=
    assert torch.cumprod(a, 0, out=torch.empty(0, device=D)).shape == (4, 3)  # an empty one it does


def test_multi_head_attention_refuses_what_the_device_refuses():
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).to(D).eval()
    q = torch.randn(2, 4, 8, device=D)
    args = (q, q, q, 8, 2, mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias)
    with torch.no_grad():
        out, w = torch._native_multi_head_attention(*args, need_weights=False)
        assert out.shape == (2, 4, 8)
        with pytest.raises(NotImplementedError, match=r"Returning attention weights \(need_weights=True\)"):
            torch._native_multi_head_attention(*args)
        with pytest.raises(NotImplementedError, match="Arbitrary mask tensors not yet supported"):
            torch._native_multi_head_attention(*args, torch.zeros(4, 4, dtype=torch.bool, device=D),
                                               need_weights=False)


def test_fallback_only_for_unimplemented_ops_uses_the_devices_message():
    torch_neuron_sim.tracking.set_fallback_only_for_unimplemented(True)
    try:
        with pytest.raises(RuntimeError, match="^CPU fallback disabled because "
                                               "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1. Operation "
                                               r"aten::mm failed to execute on Neuron \(last implementation: "):
            torch.mm(torch.ones(2, 3, device=D), torch.ones(2, 3, device=D))
    finally:
        torch_neuron_sim.tracking.set_fallback_only_for_unimplemented(False)


def test_mm_shape_errors_are_the_devices():
    a = torch.randn(2, 3, device=D)
    with pytest.raises(RuntimeError, match=r"^a and b must have same reduction dim, but got \[2, 3\] X \[2, 3\]\."):
        torch.mm(a, a)
    with pytest.raises(RuntimeError, match="^a must be 2D"):
        torch.mm(torch.randn(3, device=D), a)
    with pytest.raises(RuntimeError, match="^b must be 2D"):
        torch.mm(a.t(), torch.randn(2, device=D))
    with pytest.raises(RuntimeError, match=r"must have same reduction dim"):
        torch.mm(a, a, out=torch.empty(2, 2, device=D))
    torch_neuron_sim.tracking.set_fallback_only_for_unimplemented(True)
    try:
        with pytest.raises(RuntimeError, match=r"^CPU fallback disabled .* Operation aten::mm failed to execute on "
                                               r"Neuron .*Details: .*a and b must have same reduction dim"):
            torch.mm(a, a)
    finally:
        torch_neuron_sim.tracking.set_fallback_only_for_unimplemented(False)
    torch.testing.assert_close((a @ a.t()).cpu(), a.cpu() @ a.cpu().t())  # the process stays usable


def test_an_out_of_bounds_index_is_a_runtime_error():
    x = torch.arange(4.0, device=D)
    for idx in (torch.tensor([0, 5], device=D), torch.tensor([5]), torch.tensor([-5], device=D)):
        with pytest.raises(RuntimeError, match=r"index -?5 is out of bounds for dimension 0 with size 4") as info:
            x[idx]
        assert not isinstance(info.value, IndexError)
    m = torch.zeros(2, 3, device=D)
    with pytest.raises(RuntimeError, match="index 3 is out of bounds for dimension 1 with size 3"):
        m[:, torch.tensor([3], device=D)]
    assert x[torch.tensor([3, -1], device=D)].cpu().tolist() == [3.0, 3.0]


def test_argument_errors_with_the_devices_types_and_messages():
    a = torch.randn(4, 3, device=D)
    with pytest.raises(ValueError, match="Tensor list must have same number of elements as scalar list"):
        torch._foreach_add([a, a], [1.0])
    with pytest.raises(TypeError, match="cumsum\\(\\): argument 'dim' must be int, not float"):
        torch.cumsum(a, dim=1.5)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 5\)"):
        torch.index_select(a, 5, torch.tensor([0], device=D))
    with pytest.raises(IndexError, match="index out of range in self"):
        torch.index_select(a, 0, torch.tensor([7], device=D))
    with pytest.raises(TypeError, match="must be Tensor, not list"):
        torch.index_select(a, 0, [0])
    out = torch.zeros(4, 4, device=D).t()
    with pytest.raises(RuntimeError, match="^CPU fallback failed. Cannot copy result to output tensor which is not "
                                           "contiguous"):
        torch.add(a, 1, out=out[:, :3])
    assert out.cpu().eq(0).all()
    assert torch.add(a, 1, out=torch.empty(4, 3, device=D)).cpu().equal(a.cpu() + 1)  # a contiguous out= is fine
    with pytest.raises(ValueError, match="Invalid device specification: 1.5"):
        torch.neuron.device(1.5)
    with pytest.raises(ValueError, match="Expected neuron device, got cpu"):
        torch.neuron.device(torch.device("cpu"))
    with pytest.raises(ValueError, match="Incorrect device argument found, expected torch.device or int type, "
                                         "found <class 'str'>"):
        torch.neuron.get_device_name("invalid")
    assert torch.neuron.get_device_name(torch.device("neuron:2")) == "neuron:2"
    assert torch.neuron.get_device_name(1) == "neuron:1"


def test_foreach_with_a_scalar_list_of_the_wrong_length_is_a_value_error():
    ts = [torch.ones(2, device=D), torch.ones(3, device=D)]
    for call in (lambda: torch._foreach_add(ts, [1.0, 2.0, 3.0]), lambda: torch._foreach_add_(ts, [1.0]),
                 lambda: torch._foreach_mul(ts, [2.0]), lambda: torch._foreach_sub_(ts, [1.0, 2.0, 3.0]),
                 lambda: torch._foreach_div(ts, [1.0])):
        with pytest.raises(ValueError, match="^Tensor list must have same number of elements as scalar list"):
            call()
    assert [t.cpu().tolist() for t in ts] == [[1.0] * 2, [1.0] * 3]  # nothing written
    assert [t.cpu().tolist() for t in torch._foreach_add(ts, [1.0, 2.0])] == [[2.0] * 2, [3.0] * 3]


def test_multi_head_attention_warns_on_every_call():
    # Python's warning filters decide what is shown: with "always" every call's warning is seen
    # (pytest.warns sets it), in whichever test of the process it runs.
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).to(D).eval()
    q = torch.randn(2, 256, 8, device=D)
    args = (q, q, q, 8, 2, mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias)
    with torch.no_grad():
        for _ in range(3):
            with pytest.warns(UserWarning, match="Sequence length 256 is not a multiple of 512"):
                out, _ = torch._native_multi_head_attention(*args, need_weights=False)
            assert out.shape == (2, 256, 8)
