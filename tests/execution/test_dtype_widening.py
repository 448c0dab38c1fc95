"""Native ops accept the dtypes the device computes them in, even where the
CPU kernel they run lacks one: the op is computed in a wider dtype and cast
back. Where the device is not known to compute an op in a dtype (gelu on
int32: every PyTorch kernel refuses it), the CPU's error stands
(docs/dtype-widening.md)."""

import gc

import pytest
import torch

import torch_neuron_sim
from torch_neuron_sim import dtype_policy

N = "neuron"


def test_histc_on_int32_counts_in_the_input_dtype(tracked):
    # Hugging Face's MoE routing calls histc on int32 expert ids on every non-CPU device.
    ids = torch.tensor([0, 1, 1, 3, 3, 3, 7], dtype=torch.int32)
    with pytest.raises(NotImplementedError, match="histogram_cpu"):
        torch.histc(ids, bins=8, min=0, max=7)  # the CPU refuses
    counts = torch.histc(ids.to(N), bins=8, min=0, max=7)
    assert counts.device.type == N and counts.dtype == torch.int32
    assert counts.cpu().tolist() == [1, 2, 0, 3, 0, 0, 0, 1]
    assert "aten::histc" in torch_neuron_sim.get_executed_ops()
    assert dtype_policy.widened_counts().get("aten::histc", 0) >= 1


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.uint8, torch.int64])
def test_histc_on_other_integer_dtypes(dtype):
    x = torch.tensor([0, 2, 2, 5], dtype=dtype)
    out = torch.histc(x.to(N), bins=6, min=0, max=5)
    assert out.dtype == dtype
    assert out.cpu().tolist() == [1, 0, 2, 0, 0, 1]


def test_histc_out_of_the_input_dtype():
    x = torch.tensor([1, 1, 2], dtype=torch.int32).to(N)
    out = torch.empty(3, dtype=torch.int32, device=N)
    torch.histc(x, bins=3, min=0, max=2, out=out)
    assert out.cpu().tolist() == [0, 2, 1]


def test_errors_that_are_not_about_a_dtype_are_unchanged():
    x = torch.tensor([1.0, 2.0]).to(N)
    with pytest.raises(RuntimeError, match="bins"):
        torch.histc(x, bins=-1)


def test_a_dtype_the_device_lacks_is_not_widened(tracked):
    # complex is not a device compute dtype: the error stays the CPU's
    x = torch.tensor([1 + 1j, 2 + 0j])
    with pytest.raises(RuntimeError) as cpu:
        torch.histc(x, bins=2)
    with pytest.raises(RuntimeError) as dev:
        torch.histc(x.to(N), bins=2)
    assert str(dev.value) == str(cpu.value)
    assert dtype_policy.widened_counts() == {}


def test_widening_is_decided_once_per_dtype(tracked):
    # the second call takes the remembered decision and still gives the answer
    ids = torch.tensor([2, 2, 0], dtype=torch.int16).to(N)
    for _ in range(3):
        assert torch.histc(ids, bins=3, min=0, max=2).cpu().tolist() == [1, 0, 2]
    assert dtype_policy.widened_counts()["aten::histc"] == 3
    # a dtype the kernel has is not widened
    torch.histc(ids.float(), bins=3, min=0, max=2)
    assert dtype_policy.widened_counts()["aten::histc"] == 3


# Float math the CPU (and CUDA) refuse for integers: the device is taken to refuse it too.
_INT_REFUSED = {
    "gelu": lambda x: torch.nn.functional.gelu(x),
    "silu": lambda x: torch.nn.functional.silu(x),
    "softplus": lambda x: torch.nn.functional.softplus(x),
    "softmax": lambda x: torch.softmax(x, dim=-1),
    "log_softmax": lambda x: torch.log_softmax(x, dim=-1),
    "layer_norm": lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:]),
    # (the CPU's int32 conv1d exists; its transposed conv does not, nor CUDA's)
    "conv_transpose1d": lambda x: torch.nn.functional.conv_transpose1d(
        x.reshape(1, 2, 4), torch.ones(2, 3, 2, dtype=x.dtype, device=x.device)),
    "lerp": lambda x: torch.lerp(x, x, 0.5),
}


@pytest.mark.parametrize("name", sorted(_INT_REFUSED))
def test_float_math_on_integers_fails_as_on_the_cpu(name, tracked):
    fn = _INT_REFUSED[name]
    x = torch.arange(8, dtype=torch.int32).reshape(2, 4)
    with pytest.raises(Exception) as cpu:
        fn(x)
    with pytest.raises(type(cpu.value)) as dev:
        fn(x.to(N))
    assert str(dev.value) == str(cpu.value)
    assert dtype_policy.widened_counts() == {}
    # the process stays usable, and the op still computes in its own dtypes
    assert torch.allclose(fn(x.float().to(N)).cpu(), fn(x.float()), atol=1e-6)
    # Each ExceptionInfo's traceback holds this frame, which holds the ExceptionInfo: a
    # cycle that would keep the device copy of x (in fn's frame) until the next collection.
    del cpu, dev


def test_a_refused_op_leaves_no_device_memory():
    # the refusal path (CPU error, dtype decision recorded) keeps no reference to its inputs
    gc.collect()
    start = torch.neuron.memory_allocated()
    x = torch.arange(8, dtype=torch.int32).to(N)
    with pytest.raises(NotImplementedError):
        torch.nn.functional.gelu(x)
    del x
    assert torch.neuron.memory_allocated() == start


def test_the_refusals_are_recorded_per_native_op():
    with pytest.raises(NotImplementedError, match="not implemented for 'Short'"):
        torch.nn.functional.gelu(torch.ones(3, dtype=torch.int16, device=N))
    assert "int16" in dtype_policy.cpu_error_dtypes()["aten::gelu"]


def test_bool_matmul_fails_as_on_the_cpu():
    a = torch.ones(2, 2, dtype=torch.bool)
    with pytest.raises(RuntimeError) as cpu:
        torch.mm(a, a)
    with pytest.raises(RuntimeError) as dev:
        torch.mm(a.to(N), a.to(N))
    assert str(dev.value) == str(cpu.value)


def test_abs_of_bool_is_computed_as_accelerators_do(tracked):
    # CUDA's abs has bool (abs of a bool is itself); the CPU kernel lacks it
    b = torch.tensor([True, False, True])
    with pytest.raises(RuntimeError):
        torch.abs(b)
    out = torch.abs(b.to(N))
    assert out.dtype == torch.bool and out.cpu().tolist() == [True, False, True]
    assert dtype_policy.widened_counts().get("aten::abs", 0) == 1
