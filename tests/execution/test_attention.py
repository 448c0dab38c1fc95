"""scaled_dot_product_attention on neuron takes the real backend's path: 4-D
float32/float16/bfloat16 q/k/v with equal dtypes run the fused attention op
natively (bias, causal, grouped-query heads, dropout); other inputs
decompose into the math path, op by op (batch-less 3-D inputs: by torch version,
torch_versions.py). Both tracked."""
import pytest
import torch
import torch.nn.functional as F

import torch_neuron_sim
from torch_neuron_sim import torch_versions


@pytest.fixture(autouse=True)
def default_native_ops():
    """These tests rely on the default table; other tests may have changed it."""
    torch_neuron_sim.native_ops.load()


FUSED = "aten::_scaled_dot_product_fused_attention_overrideable"


def neuron(*ts):
    return [t.detach().to("neuron").requires_grad_(t.requires_grad) for t in ts]


@pytest.mark.parametrize("case", ["plain", "causal", "float_mask", "bool_mask", "gqa"])
def test_fused_attention_matches_cpu_with_gradients(case, tracked):
    g = torch.Generator().manual_seed(0)
    hk = 2 if case == "gqa" else 4
    s = 5 if case == "causal" else 7
    q = torch.randn(2, 4, 5, 8, generator=g, requires_grad=True)
    k = torch.randn(2, hk, s, 8, generator=g, requires_grad=True)
    v = torch.randn(2, hk, s, 8, generator=g, requires_grad=True)
    kw = {"plain": {}, "causal": {"is_causal": True}, "float_mask": {"attn_mask": torch.randn(5, s, generator=g)},
          "bool_mask": {"attn_mask": torch.rand(5, s, generator=g) > 0.3}, "gqa": {"enable_gqa": True}}[case]
    ref = F.scaled_dot_product_attention(q, k, v, **kw)
    ref.square().sum().backward()
    qn, kn, vn = neuron(q, k, v)
    kwn = {a: b.to("neuron") if isinstance(b, torch.Tensor) else b for a, b in kw.items()}
    out = F.scaled_dot_product_attention(qn, kn, vn, **kwn)
    out.square().sum().backward()
    torch.testing.assert_close(out.cpu(), ref)
    for a, b in ((qn, q), (kn, k), (vn, v)):
        torch.testing.assert_close(a.grad.cpu(), b.grad)
    assert FUSED in tracked.get_executed_ops() and FUSED + "_backward" in tracked.get_executed_ops()
    assert not tracked.get_fallback_ops()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_attention_in_a_model_layout_matches_cpu_and_torch_meta_strides(causal, dtype, tracked):
    # q/k/v as attention modules make them, (batch, seq, heads, dim) transposed to
    # (batch, heads, seq, dim), the query split off a wider projection as GPT-2's is (not
    # dense); fewer queries than keys (causal is aligned top-left); a scale
    g = torch.Generator().manual_seed(1)
    wide = torch.randn(2, 5, 48, generator=g).to(dtype).requires_grad_()
    k, v = (torch.randn(2, 7, 3, 8, generator=g).to(dtype).transpose(1, 2).requires_grad_() for _ in range(2))
    wide_n, kn, vn = neuron(wide, k, v)
    q, qn = (w[..., :24].view(2, 5, 3, 8).transpose(1, 2) for w in (wide, wide_n))
    assert qn.stride() == q.stride() == (240, 8, 48, 1)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=0.3)
    ref.square().sum().backward()
    out = F.scaled_dot_product_attention(qn, kn, vn, is_causal=causal, scale=0.3)
    out.square().sum().backward()
    tol = {} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
    torch.testing.assert_close(out.cpu(), ref, **tol)
    for a, b in ((wide_n, wide), (kn, k), (vn, v)):
        torch.testing.assert_close(a.grad.cpu(), b.grad, **tol)
    assert FUSED in tracked.get_executed_ops() and not tracked.get_fallback_ops()
    # the op's results are laid out as torch's meta kernels lay them out (what a compiled graph assumes)
    fused, backward = torch.ops.aten._scaled_dot_product_fused_attention_overrideable, \
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward
    meta = [torch.empty_strided(t.shape, t.stride(), dtype=dtype, device="meta") for t in (q, k, v)]
    got = fused(qn.detach(), kn.detach(), vn.detach(), None, 0.0, causal, False, scale=0.3)
    want = fused(*meta, None, 0.0, causal, False, scale=0.3)
    assert [got[i].stride() for i in (0, 1)] == [want[i].stride() for i in (0, 1)]
    grads = backward(torch.ones_like(got[0]), qn.detach(), kn.detach(), vn.detach(), None, [True, True, True, False],
                     got[0], got[1], got[2], got[3], got[4], got[5], 0.0, causal, got[6], got[7], scale=0.3)
    meta_grads = backward(torch.empty_like(want[0]), *meta, None, [True, True, True, False], want[0], want[1],
                          want[2], want[3], 5, 7, 0.0, causal, want[6], want[7], scale=0.3)
    assert [t.stride() for t in grads[:3]] == [t.stride() for t in meta_grads[:3]]


def test_gradients_and_inputs_without_a_unit_last_stride_match_cpu():
    # sum()'s backward hands attention an expanded gradient (every stride 0); a key read
    # through a transpose has no unit stride in its head dimension either
    g = torch.Generator().manual_seed(2)
    q = torch.randn(1, 2, 4, 8, generator=g, requires_grad=True)
    k = torch.randn(1, 2, 8, 4, generator=g).transpose(-2, -1).requires_grad_()
    v = torch.randn(1, 2, 4, 8, generator=g, requires_grad=True)
    F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    qn, kn, vn = neuron(q, k, v)
    out = F.scaled_dot_product_attention(qn, kn, vn, is_causal=True)
    out.sum().backward()
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v, is_causal=True))
    for a, b in ((qn, q), (kn, k), (vn, v)):
        torch.testing.assert_close(a.grad.cpu(), b.grad)


def test_the_fused_op_called_directly_with_another_value_head_size_matches_the_math():
    g = torch.Generator().manual_seed(4)
    q = torch.randn(2, 5, 3, 8, generator=g).transpose(1, 2)  # a module's layout
    k, v = torch.randn(2, 3, 7, 8, generator=g), torch.randn(2, 3, 7, 4, generator=g)
    fused = torch.ops.aten._scaled_dot_product_fused_attention_overrideable
    qn, kn, vn = neuron(q, k, v)
    out = fused(qn, kn, vn, None, 0.0, True)[0]
    keep = torch.ones(5, 7, dtype=torch.bool).tril()
    want = (q @ k.transpose(-2, -1) / 8 ** 0.5).masked_fill(~keep, float("-inf")).softmax(-1) @ v
    torch.testing.assert_close(out.cpu(), want)
    meta = [torch.empty_strided(t.shape, t.stride(), device="meta") for t in (qn, kn, vn)]
    assert out.stride() == fused(*meta, None, 0.0, True)[0].stride() == (60, 4, 12, 1)
    # batch-less inputs never reach the op through scaled_dot_product_attention: called so, a clear error
    with pytest.raises(RuntimeError, match="takes 4-D query, key and value"):
        fused(*neuron(q[0], k[0], v[0]))
    assert torch.equal(fused(*neuron(q, k, k))[0].cpu(), fused(*neuron(q, k, k))[0].cpu())  # still usable


def test_other_dtypes_take_the_math_path(tracked):
    x64 = torch.randn(1, 2, 5, 4, dtype=torch.float64)  # float64 is not an attention dtype
    out = F.scaled_dot_product_attention(*neuron(x64, x64, x64))
    # agrees with the CPU to float32's precision, not float64's (2.5e-7 apart under torch 2.14)
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(x64, x64, x64), atol=1e-5, rtol=1.3e-6)
    ran = tracked.get_executed_ops()
    assert FUSED not in ran and "aten::bmm" in ran and "aten::_softmax" in ran


def test_3d_inputs_take_the_path_the_torch_version_gives_them(tracked):
    # From torch 2.14 on, PyTorch adds a batch dimension to batch-less q/k/v before choosing
    # a backend, so they reach the fused op; before, they took the math path as they were.
    x = torch.randn(3, 5, 4)
    out = F.scaled_dot_product_attention(*neuron(x, x, x))
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(x, x, x))
    ran = tracked.get_executed_ops()
    if torch_versions.current().sdpa_batches_3d_inputs:
        assert FUSED in ran and "aten::bmm" not in ran
    else:
        assert FUSED not in ran and "aten::bmm" in ran and "aten::_softmax" in ran
    assert not tracked.get_fallback_ops()


def test_dropout_mask_is_reused_by_the_backward_pass():
    # With value = identity, the output is the dropped-out attention matrix
    # itself, so d(sum out)/d value[s, :] = sum over queries of out[:, s].
    torch.manual_seed(3)
    q, k = torch.randn(1, 1, 16, 8, device="neuron"), torch.randn(1, 1, 16, 8, device="neuron")
    v = torch.eye(16).view(1, 1, 16, 16).to("neuron").requires_grad_()
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    out.sum().backward()
    zeros = (out == 0).float().mean().item()
    assert 0.3 < zeros < 0.7
    expected = out.detach().cpu().sum(-2).unsqueeze(-1).expand(1, 1, 16, 16)
    torch.testing.assert_close(v.grad.cpu(), expected)
    # the mask comes from the neuron generator: reproducible by seed
    torch.manual_seed(3)
    q2, k2 = torch.randn(1, 1, 16, 8, device="neuron"), torch.randn(1, 1, 16, 8, device="neuron")
    assert torch.equal(F.scaled_dot_product_attention(q2, k2, v.detach(), dropout_p=0.5).cpu(), out.detach().cpu())


def test_gqa_head_mismatch_is_an_error():
    q, k = torch.randn(1, 6, 4, 8, device="neuron"), torch.randn(1, 4, 4, 8, device="neuron")
    with pytest.raises(RuntimeError, match="multiple of the number of key/value heads"):
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, k, k)
