"""The 64-bit rule: native ops compute float64 in float32 and int64 in int32
(results cast back, storage keeps the dtype); fallback ops compute at full
precision on the CPU; NEURON_SIM_DTYPE_POLICY=exact turns it off."""
import pytest
import torch

import torch_neuron_sim
from conftest import run_python


@pytest.fixture(autouse=True)
def default_native_ops():
    """These tests rely on the default table; other tests may have changed it."""
    torch_neuron_sim.native_ops.load()


N = "neuron"


def rand64(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def test_float64_matmul_differs_from_cpu_exactly_as_float32_does():
    a, b = rand64(48, 40, seed=1), rand64(40, 32, seed=2)
    on_neuron = (a.to(N) @ b.to(N)).cpu()
    assert on_neuron.dtype == torch.float64  # storage keeps the dtype
    assert torch.equal(on_neuron, (a.float() @ b.float()).double())
    assert not torch.equal(on_neuron, a @ b)  # it lost the float64 precision


def test_float64_elementwise_and_reductions_compute_in_float32():
    a = rand64(1000, seed=3)
    assert torch.equal(torch.exp(a.to(N)).cpu(), torch.exp(a.float()).double())
    assert torch.equal(a.to(N).sum().cpu(), a.float().sum().double())
    # a dtype= argument of float64 is compiled as float32 too
    x = torch.randn(1000)
    assert torch.equal(x.to(N).sum(dtype=torch.float64).cpu(), x.sum(dtype=torch.float32).double())


def test_int64_arithmetic_wraps_like_int32():
    big = torch.tensor([2**31 - 1, 5, -2**31], dtype=torch.int64)
    assert (big.to(N) + 1).cpu().tolist() == [-2**31, 6, -2**31 + 1]
    assert (big.to(N) + 1).dtype == torch.int64
    assert (torch.tensor([70000]).to(N) * 70000).item() == (70000 * 70000 + 2**31) % 2**32 - 2**31


def test_int64_indices_still_index():
    w = torch.randn(10, 4)
    idx = torch.tensor([[1, 9], [0, 3]])
    assert torch.equal(torch.nn.functional.embedding(idx.to(N), w.to(N)).cpu(), torch.nn.functional.embedding(idx, w))
    src = torch.randn(3, 5)
    gi = torch.tensor([[0, 4], [2, 1], [3, 3]])
    assert torch.equal(torch.gather(src.to(N), 1, gi.to(N)).cpu(), torch.gather(src, 1, gi))


def test_in_place_and_out_arguments_keep_their_dtype():
    a, b = rand64(64, seed=4), rand64(64, seed=5)
    x = a.to(N)
    x.add_(b.to(N))
    assert x.dtype == torch.float64
    assert torch.equal(x.cpu(), (a.float() + b.float()).double())
    out = torch.empty(64, dtype=torch.float64, device=N)
    r = torch.mul(a.float().to(N), b.float().to(N), out=out)
    assert r is out and out.dtype == torch.float64
    assert torch.equal(out.cpu(), (a.float() * b.float()).double())
    params = [rand64(8, seed=s).to(N) for s in (6, 7)]
    torch._foreach_add_(params, [rand64(8, seed=8).to(N)] * 2)
    assert all(p.dtype == torch.float64 for p in params)
    assert torch.equal(params[0].cpu(), (rand64(8, seed=6).float() + rand64(8, seed=8).float()).double())


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64])
def test_writes_to_a_64bit_view_whose_elements_share_memory_match_the_cpu(dtype):
    # The elements outside the view keep their full 64-bit values (not
    # representable in 32 bits), and only the view's memory is written.
    big = 2**40 + 3 if dtype == torch.int64 else 1 + 2**-40
    base = torch.arange(12, dtype=dtype) + big
    writes = {
        "zero_ of an expanded row": lambda t: t[1:2].expand(4).zero_(),
        "fill_ of a stride-0 as_strided view": lambda t: t.as_strided((2, 3), (0, 2), 1).fill_(7),
        "fill_ of an expanded matrix": lambda t: t[:3].view(1, 3).expand(5, 3).fill_(-2),
        "fill_ of rows that overlap": lambda t: t.as_strided((3, 2), (1, 1), 4).fill_(5),
        "masked_fill_ of an expanded row": lambda t: t[2:3].expand(3).masked_fill_(
            torch.tensor([False, True, False], device=t.device), 9),
    }
    for name, write in writes.items():
        cpu, dev = base.clone(), base.to(N)
        write(cpu)
        write(dev)
        assert torch.equal(dev.cpu(), cpu), name
    # what the CPU refuses (an in-place add into an expanded view), the device
    # refuses too, and the storage is left as it was
    cpu, dev = base.clone(), base.to(N)
    with pytest.raises(RuntimeError, match="more than one element"):
        cpu[:1].expand(3).add_(1)
    with pytest.raises(RuntimeError, match="more than one element"):
        dev[:1].expand(3).add_(1)
    assert torch.equal(dev.cpu(), base)


def test_zero_dim_tensors_are_not_narrowed():
    s = torch.tensor(1 + 2**-40, dtype=torch.float64)
    assert (s.to(N) * s.to(N)).item() == (s * s).item() != 1.0


def test_fallback_ops_compute_in_full_precision():
    a = rand64(50, seed=9)
    assert "aten::cumprod" not in torch_neuron_sim.native_ops.current()
    assert torch.equal(torch.cumprod(a.to(N), 0).cpu(), torch.cumprod(a, 0))


def test_downcasts_and_host_casts_are_counted(tracked):
    before = torch_neuron_sim.dtype_policy.host_casts_64bit()
    a = torch.randn(8, 8, device=N).double()  # float32 -> float64 on a neuron tensor: a host cast
    assert torch_neuron_sim.dtype_policy.host_casts_64bit() == before + 1
    a @ a
    torch.tensor([1, 2], device=N) + 1
    counts = torch_neuron_sim.dtype_policy.downcast_counts()
    assert counts["aten::mm"] == {"float64": 2, "int64": 0}
    assert counts["aten::add.Tensor"]["int64"] == 1


def test_exact_policy_turns_it_off():
    r = run_python("""
        import torch, torch_neuron_sim
        assert torch_neuron_sim.dtype_policy.get_dtype_policy() == "exact"
        g = torch.Generator().manual_seed(0)
        a = torch.randn(40, 40, generator=g, dtype=torch.float64)
        assert torch.equal((a.to("neuron") @ a.to("neuron")).cpu(), a @ a)
        assert (torch.tensor([2**31 - 1], device="neuron") + 1).item() == 2**31
        assert torch_neuron_sim.dtype_policy.downcast_counts() == {}
        # compiled graphs too: float64 stays float64, int64 is not wrapped through int32
        f = torch.compile(lambda x, y: x @ y + 1e-9, backend="neuron")
        torch.testing.assert_close(f(a.to("neuron"), a.to("neuron")).cpu(), a @ a + 1e-9, rtol=1e-12, atol=1e-12)
        g = torch.compile(lambda t: t + 1, backend="neuron")
        assert g(torch.tensor([2**31 - 1, 2**40], device="neuron")).cpu().tolist() == [2**31, 2**40 + 1]
        print("ok")
    """, env={"NEURON_SIM_DTYPE_POLICY": "exact"})
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout


def test_policy_switch_at_runtime():
    a = rand64(16, 16, seed=10)
    try:
        torch_neuron_sim.dtype_policy.set_dtype_policy("exact")
        assert torch.equal((a.to(N) @ a.to(N)).cpu(), a @ a)
    finally:
        torch_neuron_sim.dtype_policy.set_dtype_policy("trainium")
    with pytest.raises(ValueError, match="trainium"):
        torch_neuron_sim.dtype_policy.set_dtype_policy("fast")


def test_factories_with_a_64bit_dtype_compute_in_32_bits():
    r = torch.full((3,), 0.1, dtype=torch.float64, device=N)
    assert r.dtype == torch.float64
    assert torch.equal(r.cpu(), torch.full((3,), 0.1, dtype=torch.float32).double())
    assert torch.full((2,), 2**32 + 7, dtype=torch.int64, device=N).tolist() == [7, 7]


def test_compiled_graph_inputs_wrap_the_dtypes_the_launch_check_names():
    # one list for the C++ launch check and the Python wrap (dtype_policy.h)
    from torch_neuron_sim.compile import executors
    from torch_neuron_sim.execution import dtype_policy

    assert dtype_policy.WIDE_INT == (torch.int64, torch.uint64)
    assert executors.WIDE_INT is dtype_policy.WIDE_INT
    f = torch.compile(lambda x: x + 1, backend="neuron")
    assert f(torch.tensor([2**32 + 7, 5], device=N)).cpu().tolist() == [8, 6]  # held as int32 on the device
