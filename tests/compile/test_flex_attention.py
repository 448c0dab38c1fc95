"""FlexAttention on neuron: eager (torch's device check widened for neuron)
and under torch.compile(backend="neuron") (the higher-order ops rewritten
into ATen ops), forward and gradients against the CPU's FlexAttention."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import torch_neuron_sim

DEV = "neuron"
B, HQ, L, E = 2, 4, 32, 16
TOL = {torch.float32: dict(atol=2e-5, rtol=2e-5), torch.bfloat16: dict(atol=3e-2, rtol=3e-2)}
GRAD_TOL = {torch.float32: dict(atol=5e-5, rtol=5e-5), torch.bfloat16: dict(atol=6e-2, rtol=6e-2)}


def causal(b, h, q, kv):
    return q >= kv


def sliding_window(b, h, q, kv):
    return (q >= kv) & (q - kv <= 8)


DOCS = torch.tensor([0] * 10 + [1] * 14 + [2] * 8)  # three documents packed into one sequence


def documents(docs):
    def mask(b, h, q, kv):
        return docs[q] == docs[kv]
    return mask


def alibi(slopes):
    def score_mod(score, b, h, q, kv):
        return score - slopes[h] * (q - kv).abs()
    return score_mod


# name -> (mask_mod or None, score_mod or None, key/value heads)
CASES = {
    "causal": (causal, None, HQ),
    "sliding_window": (sliding_window, None, HQ),
    "documents": ("documents", None, HQ),
    "alibi": (causal, "alibi", HQ),  # causal ALiBi, as decoders use it
    "gqa_causal": (causal, None, 2),
}


def make(case, device):
    mask_mod, score_mod, hkv = CASES[case]
    if mask_mod == "documents":
        mask_mod = documents(DOCS.to(device))
    if score_mod == "alibi":
        score_mod = alibi(torch.tensor([2.0 ** -(i + 1) for i in range(HQ)], device=device))
    block_mask = create_block_mask(mask_mod, None, None, L, L, device=device) if mask_mod else None
    return score_mod, block_mask, hkv


def inputs(dtype, hkv, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, h, L, E, generator=g).to(dtype) for h in (HQ, hkv, hkv)]


def cpu_reference(q, k, v, case, return_lse=False):
    """CPU FlexAttention, gradients included: torch refuses a CPU backward at
    its entry point, so its higher-order op is called directly (PyTorch's own
    CPU implementation of the forward and the backward)."""
    from torch._higher_order_ops.flex_attention import flex_attention as hop
    from torch.nn.attention.flex_attention import _apply_kernel_options, _create_empty_block_mask, _identity

    score_mod, block_mask, hkv = make(case, "cpu")
    block_mask = block_mask or _create_empty_block_mask(q, k)
    opts = _apply_kernel_options(q, k, v, return_lse, None, None)
    out, lse, _ = hop(q, k, v, score_mod or _identity, block_mask.as_tuple(), 1 / math.sqrt(E), opts)
    return out, lse * math.log(2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("case", CASES)
def test_eager_forward_and_gradients_match_cpu(case, dtype, tracked):
    q, k, v = inputs(dtype, CASES[case][2])
    score_mod, block_mask, hkv = make(case, DEV)
    dq, dk, dv = (t.to(DEV).requires_grad_() for t in (q, k, v))
    out, lse = flex_attention(dq, dk, dv, score_mod=score_mod, block_mask=block_mask, enable_gqa=hkv != HQ,
                              return_lse=True)
    assert out.device.type == DEV and lse.device.type == DEV
    grad = torch.randn_like(out.float()).to(dtype)
    (out.float() * grad.float()).sum().backward()

    cq, ck, cv = (t.clone().requires_grad_() for t in (q, k, v))
    ref, ref_lse = cpu_reference(cq, ck, cv, case, return_lse=True)
    (ref.float() * grad.cpu().float()).sum().backward()
    torch.testing.assert_close(out.cpu(), ref, **TOL[dtype])
    torch.testing.assert_close(lse.cpu(), ref_lse, **TOL[torch.float32])
    for a, b in ((dq, cq), (dk, ck), (dv, cv)):
        torch.testing.assert_close(a.grad.cpu(), b.grad, **GRAD_TOL[dtype])
    # CPU FlexAttention's own public forward agrees too
    cpu_score_mod, cpu_mask, _ = make(case, "cpu")
    public = flex_attention(q, k, v, score_mod=cpu_score_mod, block_mask=cpu_mask, enable_gqa=hkv != HQ)
    torch.testing.assert_close(out.detach().cpu(), public, **TOL[dtype])


def test_other_devices_keep_torchs_check():
    q = torch.randn(1, 1, 8, 8, requires_grad=True)
    with pytest.raises(NotImplementedError, match="does not support backward on CPU"):
        flex_attention(q, q, q)


def test_fully_masked_rows_give_zero_and_minus_inf_lse():
    def nothing_for_first_rows(b, h, q, kv):
        return q >= 4
    q, k, v = (t.to(DEV) for t in inputs(torch.float32, HQ))
    mask = create_block_mask(nothing_for_first_rows, None, None, L, L, device=DEV)
    out, lse = flex_attention(q, k, v, block_mask=mask, return_lse=True)
    assert torch.equal(out[:, :, :4].cpu(), torch.zeros(B, HQ, 4, E))
    assert torch.isneginf(lse[:, :, :4].cpu()).all() and torch.isfinite(lse[:, :, 4:].cpu()).all()


@pytest.mark.parametrize("executor", ["inductor", "graph"])
@pytest.mark.parametrize("case", ["causal", "documents", "alibi", "gqa_causal"])
def test_compiled_graph_has_no_fallback(case, executor, tracked):
    import torch._dynamo
    torch._dynamo.reset()
    q, k, v = inputs(torch.float32, CASES[case][2], seed=1)
    score_mod, block_mask, hkv = make(case, DEV)

    def attend(q, k, v):
        out, lse = flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, enable_gqa=hkv != HQ,
                                  return_lse=True)
        return out, lse

    compiled = torch.compile(attend, backend="neuron", options={"executor": executor})
    dq, dk, dv = (t.to(DEV).requires_grad_() for t in (q, k, v))
    before = torch_neuron_sim.tracking.host_device_copies()
    out, lse = compiled(dq, dk, dv)
    (out * 1.5).sum().backward()
    copies = torch_neuron_sim.tracking.host_device_copies() - before

    records = [r for r in torch_neuron_sim.compile.records() if r.kind in ("forward", "backward")][-2:]
    assert {r.kind for r in records} == {"forward", "backward"}
    assert all(not r.fallback_ops and r.executor == executor for r in records), records
    assert torch_neuron_sim.get_fallback_ops() == []
    assert copies == 0  # no CPU round trip
    if executor == "graph":  # op by op: the decomposition's ops ran on the device
        assert {"aten::bmm", "aten::exp", "aten::amax"} <= set(torch_neuron_sim.get_executed_ops())

    cq, ck, cv = (t.clone().requires_grad_() for t in (q, k, v))
    ref, ref_lse = cpu_reference(cq, ck, cv, case, return_lse=True)
    (ref * 1.5).sum().backward()
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), **TOL[torch.float32])
    torch.testing.assert_close(lse.detach().cpu(), ref_lse.detach(), **TOL[torch.float32])
    for a, b in ((dq, cq), (dk, ck), (dv, cv)):
        torch.testing.assert_close(a.grad.cpu(), b.grad, **GRAD_TOL[torch.float32])


def test_compiled_bf16_forward(tracked):
    import torch._dynamo
    torch._dynamo.reset()
    q, k, v = inputs(torch.bfloat16, HQ, seed=2)
    _, block_mask, _ = make("sliding_window", DEV)
    out = torch.compile(lambda q, k, v: flex_attention(q, k, v, block_mask=block_mask), backend="neuron")(
        *(t.to(DEV) for t in (q, k, v)))
    _, cpu_mask, _ = make("sliding_window", "cpu")
    torch.testing.assert_close(out.cpu(), flex_attention(q, k, v, block_mask=cpu_mask), **TOL[torch.bfloat16])
    assert torch_neuron_sim.get_fallback_ops() == []


class TinyGPT(nn.Module):
    """Embedding, one pre-norm attention block and an MLP, causal attention by
    FlexAttention (or, for the CPU reference, by SDPA with is_causal)."""

    def __init__(self, vocab=64, d=32, heads=4, seq=L):
        super().__init__()
        self.heads, self.seq = heads, seq
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.head = nn.Linear(d, vocab)
        self.block_mask = None

    def attend(self, q, k, v):
        if self.block_mask is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return flex_attention(q, k, v, block_mask=self.block_mask)

    def forward(self, tokens):
        b, s = tokens.shape
        x = self.emb(tokens) + self.pos
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        x = x + self.proj(self.attend(q, k, v).transpose(1, 2).reshape(b, s, -1))
        x = x + self.mlp(self.ln2(x))
        return self.head(x)


def train_gpt(model, device, compiled=False, steps=5):
    model = model.to(device)
    if device == DEV:
        model.block_mask = create_block_mask(causal, None, None, L, L, device=DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=False)
    fwd = torch.compile(model, backend="neuron") if compiled else model
    g = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, 64, (2, L + 1), generator=g).to(device)  # one batch, learned step by step
    losses = []
    for _ in range(steps):
        logits = fwd(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_tiny_gpt_with_flex_attention_trains_like_cpu(compiled):
    import torch._dynamo
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = TinyGPT()
    reference = TinyGPT()
    reference.load_state_dict(model.state_dict())
    cpu = train_gpt(reference, "cpu")
    neuron = train_gpt(model, DEV, compiled=compiled)
    assert neuron[-1] < neuron[0]  # it learns
    torch.testing.assert_close(torch.tensor(neuron), torch.tensor(cpu), atol=2e-4, rtol=2e-4)
