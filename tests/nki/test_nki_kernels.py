"""The example kernels (examples/nki/) against PyTorch references, with the
parity kit: each kernel runs on `neuron` (through torch_neuronx.wrap_nki, on
the NKI simulator) and the reference runs on the CPU, over shapes hypothesis
draws within the hardware's limits; eagerly and under
torch.compile(backend="neuron", fullgraph=True). The flash-attention kernel
also trains a small transformer as a custom op with a PyTorch backward."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, strategies as st

import torch_neuron_sim
from torch_neuron_sim.testing import assert_parity
from torch_neuron_sim.nki.torch_wiring import wrap_nki

from _nki_examples import few, load

add = load("tiled_add")
mm = load("matmul")
sm = load("softmax")
rms = load("rmsnorm")
fa = load("flash_attention")


def on_device(kernel_call, reference):
    """fn for assert_parity: the kernel on `neuron`, the PyTorch reference on the CPU."""
    def fn(*args):
        return kernel_call(*args) if args[0].device.type == "neuron" else reference(*args)
    return fn


@few(4)
@given(m=st.integers(1, 300), n=st.integers(1, 1100), dtype=st.sampled_from([torch.float32, torch.bfloat16]))
def test_tiled_add_loop(m, n, dtype):
    a, b = torch.randn(m, n).to(dtype), torch.randn(m, n).to(dtype)
    assert_parity(on_device(lambda x, y: wrap_nki(add.add_kernel)(x, y), torch.add), a, b)


@few(3)
@given(tm=st.integers(1, 3), tn=st.integers(1, 3))
def test_tiled_add_spmd_grid(tm, tn):
    a, b = torch.randn(128 * tm, 512 * tn), torch.randn(128 * tm, 512 * tn)
    assert_parity(on_device(lambda x, y: wrap_nki(add.add_kernel_spmd)[tm, tn](x, y), torch.add), a, b)


@few(4)
@given(k=st.integers(1, 300), m=st.integers(1, 300), n=st.integers(1, 700))
def test_matmul_bf16_in_fp32_accumulation(k, m, n):
    lhsT = torch.randn(k, m).to(torch.bfloat16)
    rhs = torch.randn(k, n).to(torch.bfloat16)
    # fp32 accumulation of bf16 products: the reference multiplies the same values in fp32.
    assert_parity(on_device(lambda a, b: wrap_nki(mm.matmul_kernel)(a, b), lambda a, b: a.float().T @ b.float()),
                  lhsT, rhs, rtol=1e-5, atol=1e-4)


@few(4)
@given(r=st.integers(1, 300), c=st.integers(1, 600))
def test_softmax(r, c):
    x = torch.randn(r, c) * 4
    assert_parity(on_device(lambda t: wrap_nki(sm.softmax_kernel)(t), lambda t: torch.softmax(t, -1)), x)


@few(4)
@given(r=st.integers(1, 300), d=st.integers(1, 600))
def test_rmsnorm(r, d):
    x, w = torch.randn(r, d), torch.randn(d)
    assert_parity(on_device(lambda t, u: wrap_nki(rms.rmsnorm_kernel)(t, u),
                            lambda t, u: F.rms_norm(t, (d,), u, eps=1e-6)), x, w)


def _reference_attention(q, k, v):
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    mask = torch.ones(s.shape[-2:], dtype=torch.bool).triu(1)
    return o, torch.logsumexp(s.masked_fill(mask, float("-inf")), -1)


@few(3)
@given(bh=st.integers(1, 2), tiles=st.integers(1, 3), d=st.integers(8, 128))
def test_flash_attention_forward_and_lse(bh, tiles, d):
    q, k, v = (torch.randn(1, bh, 128 * tiles, d) for _ in range(3))
    assert_parity(on_device(fa.flash_attention_forward, _reference_attention), q, k, v, rtol=1e-4, atol=1e-4)


def test_compiled_graph_launches_the_kernels():
    """Under torch.compile(backend="neuron", fullgraph=True) each launch is one graph node."""
    from torch._dynamo.testing import CompileCounterWithBackend

    def model(a, b, w):
        y = wrap_nki(add.add_kernel)(a, b)
        z = wrap_nki(rms.rmsnorm_kernel)(y, w)
        return wrap_nki(sm.softmax_kernel)(z) * 2

    def reference(a, b, w):
        return torch.softmax(F.rms_norm(a + b, (a.shape[1],), w, eps=1e-6), -1) * 2

    counter = CompileCounterWithBackend("neuron")
    compiled = torch.compile(model, backend=counter, fullgraph=True)
    a, b, w = torch.randn(130, 600), torch.randn(130, 600), torch.randn(600)
    assert_parity(on_device(compiled, reference), a, b, w)
    assert counter.frame_count == 1
    launches = [n for n in counter.graphs[0].graph.nodes
                if n.target in (torch.ops.nki_sim.launch, torch.ops.nki_sim.launch.default)]
    assert len(launches) == 3


def test_compiled_matmul_and_attention_on_neuron():
    compiled_mm = torch.compile(lambda a, b: wrap_nki(mm.matmul_kernel)(a, b), backend="neuron", fullgraph=True)
    lhsT, rhs = torch.randn(200, 130).bfloat16(), torch.randn(200, 600).bfloat16()
    assert_parity(on_device(compiled_mm, lambda a, b: a.float().T @ b.float()), lhsT, rhs, rtol=1e-5, atol=1e-4)
    compiled_fa = torch.compile(fa.flash_attention, backend="neuron", fullgraph=True)
    q, k, v = (torch.randn(1, 2, 256, 32) for _ in range(3))
    assert_parity(on_device(compiled_fa, lambda *t: _reference_attention(*t)[0]), q, k, v, rtol=1e-4, atol=1e-4)


def test_flash_attention_op_gradients_match_pytorch():
    q, k, v = (torch.randn(1, 2, 128, 16) for _ in range(3))
    assert_parity(on_device(fa.flash_attention, lambda *t: F.scaled_dot_product_attention(*t, is_causal=True)),
                  q, k, v, grad=True, rtol=1e-4, atol=1e-4)


def test_transformer_trains_with_the_kernel_on_neuron():
    torch_neuron_sim.tracking.clear_op_tracking()
    neuron = fa.train(steps=3, device="neuron")
    cpu = fa.train(steps=3, device="cpu")  # the kernel simulated on the CPU tensors
    assert neuron[-1] < neuron[0]
    assert neuron == pytest.approx(cpu, rel=1e-4, abs=1e-4)
    assert "nki_flash_fwd" in torch_neuron_sim.tracking.get_executed_ops()
