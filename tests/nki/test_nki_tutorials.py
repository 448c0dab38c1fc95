"""AWS's NKI tutorials as users run them: kernels in the `neuronxcc.nki` dialect
(tests/nki/_nki_tutorial_kernels.py: tensor addition, SPMD addition over two
cores, matrix multiplication, transpose2d, average_pool2d, a fused Mamba scan),
called on `neuron` tensors as the native backend calls them, and on NumPy arrays
through the legacy entry points (simulate_kernel, baremetal, benchmark); each
result compared with a torch reference on the CPU."""
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import torch_neuron_sim
from torch_neuron_sim import nki as sim_nki
from torch_neuron_sim.nki import NKIError

_ALIASED = ("torch_neuronx", "nki", "neuronxcc")


def _load_kernels():
    """Imports the kernels module as a user script would, with the alias installed, then
    takes the alias away again (it is per process; the module keeps its references)."""
    before = {n for n in sys.modules if n.split(".")[0] in _ALIASED}
    torch_neuron_sim.install_torch_neuronx_alias()
    try:
        spec = importlib.util.spec_from_file_location(
            "nki_tutorial_kernels", Path(__file__).with_name("_nki_tutorial_kernels.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] in _ALIASED and n not in before]:
            del sys.modules[name]


K = _load_kernels()
nl = sim_nki.language


def neuron(*tensors):
    return [t.to("neuron") for t in tensors]


def test_tensor_addition_over_tiles():
    a, b = torch.rand(256, 1024), torch.rand(256, 1024)
    out = K.add_tiles(*neuron(a, b))
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), a + b)


def test_spmd_addition_on_two_cores():
    a, b = torch.rand(512, 1024, dtype=torch.bfloat16), torch.rand(512, 1024, dtype=torch.bfloat16)
    out = K.add_on_two_cores(*neuron(a, b))
    torch.testing.assert_close(out.cpu(), a + b)
    # the grid's first dimension is 2 x 2: program_id(0) runs over the instances of both cores
    assert nl.spmd_dim(2, nl.nc(2)) == 4 == nl.nc(2) * 2
    with pytest.raises(NKIError, match="nl.spmd_dim: factors"):
        nl.spmd_dim(2, 0)


def test_matrix_multiplication_accumulates_in_psum():
    lhsT, rhs = torch.randn(512, 128), torch.randn(512, 512)
    out = K.matmul_psum(*neuron(lhsT, rhs))
    torch.testing.assert_close(out.cpu(), lhsT.T @ rhs, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("rows,f1,f2", [(5, 3, 4), (128, 8, 16)])
def test_transpose2d_through_index_arithmetic(rows, f1, f2):
    a = torch.arange(rows * f1 * f2, dtype=torch.float32).reshape(rows, f1 * f2)
    out = K.transpose_rows(a.to("neuron"), (f1, f2))
    torch.testing.assert_close(out.cpu(), a.reshape(rows, f1, f2).transpose(1, 2).reshape(rows, f1 * f2))


@pytest.mark.parametrize("c,h,w,pool", [(2, 6, 6, 2), (128, 16, 24, 4)])
def test_average_pool2d_through_rank5_index(c, h, w, pool):
    x = torch.arange(c * h * w, dtype=torch.bfloat16).reshape(c, h, w) if c == 2 else torch.randn(c, h, w)
    out = K.avg_pool(x.to("neuron"), pool)
    ref = torch.nn.functional.avg_pool2d(x.float()[None], pool, pool)[0].to(x.dtype)
    torch.testing.assert_close(out.cpu(), ref)


@sim_nki.jit
def avg_pool_ap(x, pool):
    """The same pooling in the current dialect: an access pattern (.ap) over the loaded tile
    gives the rank-5 window view, strides counted in elements of the [C, H, W] tile."""
    C, H, W = x.shape
    out = nl.ndarray((C, H // pool, W // pool), dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    sim_nki.isa.dma_copy(dst=tile, src=x)
    windows = tile.ap([[H * W, C], [pool * W, H // pool], [pool, W // pool], [W, pool], [1, pool]])
    total = nl.sum(windows, axis=[3, 4])
    result = nl.ndarray(total.shape, dtype=x.dtype, buffer=nl.sbuf)
    sim_nki.isa.tensor_scalar(dst=result, data=total, op0=nl.multiply, operand0=1.0 / (pool * pool))
    sim_nki.isa.dma_copy(dst=out, src=result)
    return out


def test_average_pool2d_through_an_access_pattern():
    x = torch.randn(64, 12, 20)
    out = avg_pool_ap(x.to("neuron"), 4)
    torch.testing.assert_close(out.cpu(), torch.nn.functional.avg_pool2d(x[None], 4, 4)[0])

    @sim_nki.jit
    def past_the_end(x):
        t = nl.load(x)
        return t.ap([[4, 128], [1, 5]])

    with pytest.raises(NKIError, match=r"ap: pattern .* reaches element 512 of tensor .* which has 512"):
        sim_nki.simulate(past_the_end)(np.zeros((128, 4), np.float32))


def mamba_reference(delta, u, A, B, C):
    """The selective scan in plain torch (float64, step by step)."""
    delta, u, A, B, C = (t.double() for t in (delta, u, A, B, C))
    decay = torch.exp(delta[:, :, None, :] * A[None, :, :, None])
    drive = delta[:, :, None, :] * B[:, None, :, :] * u[:, :, None, :]
    h = torch.zeros_like(decay[..., 0])
    states = []
    for t in range(decay.shape[-1]):
        h = decay[..., t] * h + drive[..., t]
        states.append(h)
    return (C[:, None, :, :] * torch.stack(states, -1)).sum(2).float()


def mamba_inputs(batch=1, channels=256, seq=1024, states=4):
    g = torch.Generator().manual_seed(0)
    delta = torch.rand(batch, channels, seq, generator=g) * 0.5
    u = torch.randn(batch, channels, seq, generator=g)
    A = -torch.rand(channels, states, generator=g) - 0.5   # negative: the state decays, nothing overflows
    B = torch.randn(batch, states, seq, generator=g)
    C = torch.randn(batch, states, seq, generator=g)
    return delta, u, A, B, C


@pytest.mark.parametrize("kernel", ["mamba_blocks", "mamba_chunked"])
def test_fused_mamba_scan(kernel):
    inputs = mamba_inputs()
    out = getattr(K, kernel)(*neuron(*inputs))
    torch.testing.assert_close(out.cpu(), mamba_reference(*inputs), rtol=1e-4, atol=1e-4)


def test_block_tile_charges_sbuf_per_partition():
    """A (blocks, par_dim(128), free) tile takes blocks x free elements of each partition:
    4 x 16384 fp32 is 256 KiB per partition, past trn2's 224 KiB; 2 x 16384 fits."""
    @sim_nki.jit
    def block_tile(x, blocks):
        acc = nl.zeros((blocks, nl.par_dim(128), 16384), dtype=nl.float32)
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.copy(acc[blocks - 1, 0:128, 0:4]))
        return out

    x = np.zeros((128, 4), np.float32)
    np.testing.assert_array_equal(sim_nki.simulate(block_tile)(x, 2), np.zeros((128, 4), np.float32))
    with pytest.raises(NKIError, match="SBUF capacity exceeded: .* needs 262144 bytes per partition"):
        sim_nki.simulate(block_tile)(x, 4)

    @sim_nki.jit
    def too_many_partitions(x):
        nl.zeros((2, nl.par_dim(256), 8), dtype=nl.float32)
        return x

    with pytest.raises(NKIError, match=r"partition dimension 256 .* exceeds maximum 128.*dim 1, nl.par_dim"):
        sim_nki.simulate(too_many_partitions)(x)


def test_index_expressions_refused_with_the_current_form():
    @sim_nki.jit
    def divided(x):
        i = nl.arange(128)[:, None]
        return nl.load(x[i // 2, nl.arange(4)[None, :]])

    @sim_nki.jit
    def outside(x):
        i, j = nl.mgrid[0:128, 0:4]
        return nl.load(x[i, j + 1])

    @sim_nki.jit
    def decreasing(x):
        i, j = nl.mgrid[0:128, 0:4]
        return nl.load(x[i, 3 - j])

    x = np.zeros((128, 4), np.float32)
    with pytest.raises(NKIError, match="dividing .* is legacy NKI"):
        sim_nki.simulate(divided)(x)
    with pytest.raises(NKIError, match=r"index reaching \[1, 4\] out of bounds on dimension 1 of tensor 'x'"):
        sim_nki.simulate(outside)(x)
    with pytest.raises(NKIError, match="decreases along a grid axis"):
        sim_nki.simulate(decreasing)(x)


def test_numpy_entry_points_simulate_baremetal_benchmark(capsys):
    a = np.random.rand(256, 1024).astype(np.float16)
    b = np.random.rand(256, 1024).astype(np.float16)
    np.testing.assert_allclose(sim_nki.simulate_kernel(K.add_block[2, 2], a, b), a + b)
    np.testing.assert_allclose(sim_nki.baremetal(K.add_tiles)(a, b), a + b)
    x = np.arange(2 * 6 * 6, dtype=np.float32).reshape(2, 6, 6)
    np.testing.assert_allclose(K.avg_pool(x, 2), x.reshape(2, 3, 2, 3, 2).mean(axis=(2, 4)))

    bench = sim_nki.benchmark(K.add_tiles, warmup=2, iters=10, save_neff_name="file.neff",
                              save_trace_name="profile.ntff")
    np.testing.assert_allclose(bench(a, b), a + b)
    latency = bench.benchmark_result.nc_latency
    assert latency.estimate and latency.get_latency_percentile(99) == latency.get_latency_percentile(50) > 0
    printed = capsys.readouterr().out
    assert "simulator estimate, not a measurement" in printed and "no NEFF/NTFF written" in printed
    assert not Path("file.neff").exists()

    # more work, more modelled time; as a decorator with options as well
    @sim_nki.benchmark(warmup=1, iters=1)
    @sim_nki.jit
    def add_twice(a, b):
        return K.add_tiles(K.add_tiles(a, b), b)

    add_twice(a, b)
    assert add_twice.benchmark_result.nc_latency.get_latency_percentile(50) > latency.get_latency_percentile(50)
