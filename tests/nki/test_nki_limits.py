"""Trainium's rules, enforced: each limit a kernel can break raises an error
naming the instruction, the operand and the limit, and the process stays
usable. Kernels run in nki.simulate on CPU tensors (the same checks run on
`neuron`); NEURON_PLATFORM_TARGET_OVERRIDE picks the generation."""
import numpy as np
import pytest
import torch

import torch_neuron_sim.nki.isa as nisa
import torch_neuron_sim.nki.language as nl
from torch_neuron_sim import nki
from torch_neuron_sim.nki import NKIError
from torch_neuron_sim.nki.torch_wiring import wrap_nki


def run(kernel, *args, target=None, monkeypatch=None):
    if target is not None:
        monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", target)
    return nki.simulate(kernel)(*args)


def test_partition_dimension_at_most_128():
    @nki.jit
    def k(a):
        t = nl.ndarray((256, 4), nl.float32, buffer=nl.sbuf)
        return a

    with pytest.raises(NKIError, match=r"nl.ndarray: partition dimension 256 of .* exceeds maximum 128"):
        run(k, torch.zeros(4))

    @nki.jit
    def load_too_tall(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out

    with pytest.raises(NKIError, match=r"partition dimension 256 .* exceeds maximum 128"):
        run(load_too_tall, torch.zeros(256, 4))


def _matmul(m_free, n_free, dtype=nl.float32):
    @nki.jit
    def k(a):
        s = nl.zeros((128, m_free), dtype, buffer=nl.sbuf)
        mv = nl.zeros((128, n_free), dtype, buffer=nl.sbuf)
        # the operands' limits are checked before the destination's shape
        acc = nl.ndarray((min(m_free, 128), min(n_free, 512)), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc, s, mv)
        return a
    return k


def test_matmul_stationary_free_size():
    with pytest.raises(NKIError, match=r"nisa.nc_matmul: stationary free size 256 exceeds maximum 128"):
        run(_matmul(256, 128), torch.zeros(1))


def test_matmul_moving_free_size_per_generation(monkeypatch):
    with pytest.raises(NKIError, match=r"nisa.nc_matmul: moving free size 1024 exceeds maximum 512 on trn2"):
        run(_matmul(128, 1024), torch.zeros(1), target="trn2", monkeypatch=monkeypatch)
    # NeuronCore-v4 (trn3) streams up to 4096 fp32 columns: the limit passes, the (128, 512) dst does not.
    with pytest.raises(NKIError, match=r"nisa.nc_matmul: dst .* has shape \(128, 512\); the product is \(128, 1024\)"):
        run(_matmul(128, 1024), torch.zeros(1), target="trn3", monkeypatch=monkeypatch)
    with pytest.raises(NKIError, match=r"moving free size 8192 exceeds maximum 4096 on trn3"):
        run(_matmul(16, 8192), torch.zeros(1), target="trn3", monkeypatch=monkeypatch)


def test_psum_has_eight_banks_of_2kib_per_partition():
    @nki.jit
    def k(a):
        tiles = [nl.ndarray((128, 512), nl.float32, buffer=nl.psum) for _ in range(9)]
        return a

    with pytest.raises(NKIError, match=r"PSUM capacity exceeded: .* needs 1 of the 8 banks of 2048 bytes per "
                                       r"partition, 8 are in use"):
        run(k, torch.zeros(1))

    @nki.jit
    def reuse(a):
        for _ in range(20):  # a dead tile's bank is free again
            t = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        return a

    run(reuse, torch.zeros(1))


@pytest.mark.parametrize("target,fits", [("trn1", False), ("trn2", False), ("trn3", True)])
def test_sbuf_capacity_per_partition_of_the_profile(monkeypatch, target, fits):
    @nki.jit
    def k(a):
        big = nl.ndarray((128, 60_000), nl.float32, buffer=nl.sbuf)  # 240,000 bytes per partition
        return a

    if fits:
        run(k, torch.zeros(1), target=target, monkeypatch=monkeypatch)
    else:
        capacity = {"trn1": 196608, "trn2": 229376}[target]
        with pytest.raises(NKIError, match=rf"SBUF capacity exceeded: .* needs 240000 bytes per partition, 0 are in "
                                           rf"use, {target} has {capacity} bytes per partition"):
            run(k, torch.zeros(1), target=target, monkeypatch=monkeypatch)


def test_engines_reach_only_their_memories():
    @nki.jit
    def hbm_operand(a):
        t = nl.zeros((4, 4), nl.float32)
        nisa.tensor_tensor(dst=t, data1=a, data2=t, op=nl.add)
        return a

    with pytest.raises(NKIError, match=r"nisa.tensor_tensor: data1 'a' is in HBM; .* reads nl.sbuf or nl.psum .*"
                                       r"load it into SBUF first"):
        run(hbm_operand, torch.zeros(4, 4))

    @nki.jit
    def matmul_from_psum(a):
        s = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
        mv = nl.zeros((128, 128), nl.float32)
        acc = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc, s, mv)
        return a

    with pytest.raises(NKIError, match=r"nisa.nc_matmul: stationary .* is in nl.psum; .* reads nl.sbuf"):
        run(matmul_from_psum, torch.zeros(1))

    @nki.jit
    def gpsimd_psum(a):
        p = nl.zeros((8, 8), nl.float32, buffer=nl.psum)
        s = nl.zeros((8, 8), nl.float32)
        nisa.tensor_copy(dst=s, src=p, engine=nisa.engine.gpsimd)
        return a

    with pytest.raises(NKIError, match=r"nisa.tensor_copy: src .* is in nl.psum, which GpSimd cannot access"):
        run(gpsimd_psum, torch.zeros(1))

    @nki.jit
    def both_psum(a):
        p = nl.zeros((8, 8), nl.float32, buffer=nl.psum)
        q = nl.zeros((8, 8), nl.float32, buffer=nl.psum)
        nisa.tensor_tensor(dst=p, data1=p, data2=q, op=nl.add)
        return a

    with pytest.raises(NKIError, match=r"are both in nl.psum; at most one operand may be read from PSUM"):
        run(both_psum, torch.zeros(1))

    @nki.jit
    def dma_psum(a):
        out = nl.ndarray((8, 8), nl.float32, buffer=nl.shared_hbm)
        p = nl.zeros((8, 8), nl.float32, buffer=nl.psum)
        nisa.dma_copy(dst=out, src=p)
        return out

    with pytest.raises(NKIError, match=r"nisa.dma_copy: src .* is in nl.psum, which DMA cannot access"):
        run(dma_psum, torch.zeros(1))


@nki.jit
def _writes_input(a):
    t = nl.zeros((4, 4), a.dtype)
    nisa.dma_copy(dst=a[0:4, 0:4], src=t)
    return a


def test_inputs_are_immutable_unless_marked():
    with pytest.raises(NKIError, match=r"nisa.dma_copy: cannot write kernel input 'a': inputs are immutable unless "
                                       r"marked mutable"):
        run(_writes_input, torch.ones(4, 4))
    x = torch.ones(4, 4, device="neuron")
    with pytest.raises(NKIError, match=r"nki kernel '_writes_input' writes input 'a', which is immutable"):
        wrap_nki(_writes_input)(x)
    assert torch.equal(x.cpu(), torch.ones(4, 4))  # refused before anything was written


def test_out_of_bounds_access():
    @nki.jit
    def k(a):
        t = nl.ndarray((128, 8), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[0:128, :])
        return a

    with pytest.raises(NKIError, match=r"nisa.dma_copy: src: access \[0:128\] out of bounds on dimension 0 of "
                                       r"tensor 'a' with shape \(100, 8\)"):
        run(k, torch.zeros(100, 8))

    @nki.jit
    def skip(a):
        t = nl.zeros((128, 8), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[0:128, :], oob_mode=nisa.oob_mode.skip)
        out = nl.ndarray((128, 8), a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    out = run(skip, torch.ones(100, 8))
    assert out[:100].eq(1).all() and out[100:].eq(0).all()

    @nki.jit
    def index(a):
        return a[5]

    with pytest.raises(NKIError, match=r"index 5 out of bounds on dimension 0 of tensor 'a' with shape \(4,\)"):
        run(index, torch.zeros(4))


def test_partition_mismatch():
    @nki.jit
    def k(a):
        x = nl.zeros((64, 8), nl.float32)
        y = nl.zeros((128, 8), nl.float32)
        z = nl.ndarray((64, 8), nl.float32)
        nisa.tensor_tensor(dst=z, data1=x, data2=y, op=nl.add)
        return a

    with pytest.raises(NKIError, match=r"nisa.tensor_tensor: partition dimension mismatch: data1 has 64 partitions, "
                                       r"data2 has 128"):
        run(k, torch.zeros(1))

    @nki.jit
    def contraction(a):
        s = nl.zeros((128, 64), nl.float32)
        mv = nl.zeros((64, 64), nl.float32)
        acc = nl.ndarray((64, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc, s, mv)
        return a

    with pytest.raises(NKIError, match=r"nisa.nc_matmul: partition dimension mismatch: stationary has 128 "
                                       r"partitions \(K\), moving has 64"):
        run(contraction, torch.zeros(1))


def test_output_never_written():
    @nki.jit
    def k(a):
        return nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)

    with pytest.raises(NKIError, match=r"return: output .* \(4, 4\) is never written by the kernel"):
        run(k, torch.zeros(4, 4))


def test_new_memory_holds_nan_or_a_fixed_integer():
    @nki.jit
    def k(a, b):
        out_f = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        out_i = nl.ndarray(b.shape, b.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out_f, src=nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf))
        nisa.dma_copy(dst=out_i, src=nl.ndarray(b.shape, b.dtype, buffer=nl.sbuf))
        return out_f, out_i

    f, i = run(k, np.zeros((4, 4), np.float32), np.zeros((4, 4), np.int32))
    assert np.isnan(f).all() and (i == 4).all()


def test_process_stays_usable_after_an_error():
    with pytest.raises(NKIError):
        run(_matmul(256, 128), torch.zeros(1))
    x = torch.ones(3)
    assert run(nki.jit(lambda a: a), x) is x


def test_nisa_and_nl_expose_the_language_only():
    """`nki.isa` and `nki.language` list their language in __all__, every listed name is
    there, and no helper of another module (operands.py's checks) is re-exported into them."""
    from torch_neuron_sim.nki import isa as nisa, language as nl

    for ns in (nisa, nl):
        assert ns.__all__ and all(hasattr(ns, name) for name in ns.__all__)
        assert not [n for n in ns.__all__ if n.startswith("_")]
        foreign = [n for n, v in vars(ns).items() if n.startswith("_") and not n.startswith("__") and callable(v)
                   and getattr(v, "__module__", ns.__name__) != ns.__name__ and not isinstance(v, type)]
        assert not foreign, f"{ns.__name__} re-exports {foreign}"
    assert {"dma_copy", "nc_matmul", "activation", "tensor_tensor", "engine"} <= set(nisa.__all__)
    assert {"load", "store", "exp", "add", "sbuf", "float32", "program_id"} <= set(nl.__all__)
