"""Causal flash attention, forward, as an NKI kernel, used as a custom op in a
small transformer trained on `neuron`.

The kernel (one instance per batch-head, `flash_fwd[B * H]`) walks 128-row
query tiles; for each it visits the key tiles at or before it (causality),
keeping a running row max m and row sum l (online softmax):

  scores = q·kᵀ · scale        TensorE: q and k transposed (nc_transpose) so D sits on the partitions
  diagonal tile: affine_select  keeps column <= row, fills the rest with -9984
  m' = max(m, rowmax(scores)); p = exp(scores - m') with its row sum (ScalarE)
  o = o·exp(m - m') + pᵀᵀ·v     p transposed (nc_transpose) so the key index sits on the partitions

and finally o / l and the log-sum-exp m + log l (what a backward pass needs).
The custom op (torch_neuronx.nki_op) runs the kernel forward; its backward
(register_autograd) is PyTorch's attention differentiated.

    python examples/nki/flash_attention.py
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_neuron_sim

torch_neuron_sim.install_torch_neuronx_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
import torch_neuronx  # noqa: E402

NEG = -9984.0  # the causal fill: exp() of it underflows to 0 in every dtype


@nki.jit
def flash_fwd(q, k, v, scale):
    """q, k, v: [BH, S, D] (S a multiple of 128, D <= 128). Returns o [BH, S, D] and lse [BH, S] (fp32)."""
    BH, S, D = q.shape
    T = 128
    b = nl.program_id(0)
    o = nl.ndarray((BH, S, D), q.dtype, buffer=nl.shared_hbm)
    lse = nl.ndarray((BH, S), nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(S // T):
        q_tile = nl.ndarray((T, D), q.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=q_tile, src=q[b, i * T:(i + 1) * T, :])
        qT_psum = nl.ndarray((D, T), nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=qT_psum, data=q_tile)
        qT = nl.ndarray((D, T), q.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=qT, src=qT_psum)

        m = nl.ndarray((T, 1), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=m, value=NEG)
        l_sum = nl.zeros((T, 1), nl.float32, buffer=nl.sbuf)
        acc = nl.zeros((T, D), nl.float32, buffer=nl.sbuf)
        for j in nl.sequential_range(i + 1):
            k_tile = nl.ndarray((T, D), k.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=k_tile, src=k[b, j * T:(j + 1) * T, :])
            v_tile = nl.ndarray((T, D), v.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=v_tile, src=v[b, j * T:(j + 1) * T, :])
            kT_psum = nl.ndarray((D, T), nl.float32, buffer=nl.psum)
            nisa.nc_transpose(dst=kT_psum, data=k_tile)
            kT = nl.ndarray((D, T), k.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=kT, src=kT_psum)

            s_psum = nl.ndarray((T, T), nl.float32, buffer=nl.psum)
            nisa.nc_matmul(s_psum, qT, kT)                       # q·kᵀ, query rows on partitions
            s = nl.ndarray((T, T), nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=s, op=nl.copy, data=s_psum, scale=scale)
            if j == i:                                           # the diagonal tile: keep column <= row
                nisa.affine_select(dst=s, pattern=[[-1, T]], offset=0, channel_multiplier=1, on_true_tile=s,
                                   on_false_value=NEG, cmp_op=nl.greater_equal)

            row_max = nl.ndarray((T, 1), nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=row_max, op=nl.maximum, data=s, axis=1)
            m_new = nl.ndarray((T, 1), nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=m_new, data1=m, data2=row_max, op=nl.maximum)
            neg_m = nl.ndarray((T, 1), nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=neg_m, data=m_new, op0=nl.multiply, operand0=-1.0)
            p = nl.ndarray((T, T), v.dtype, buffer=nl.sbuf)
            p_sum = nl.ndarray((T, 1), nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=p, op=nl.exp, data=s, bias=neg_m, reduce_op=nl.add, reduce_res=p_sum,
                            reduce_cmd=nisa.reduce_cmd.reset_reduce)
            alpha = nl.ndarray((T, 1), nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=alpha, op=nl.exp, data=m, bias=neg_m)      # exp(m - m')
            nisa.tensor_scalar(dst=l_sum, data=l_sum, op0=nl.multiply, operand0=alpha, op1=nl.add,
                               operand1=p_sum)
            nisa.tensor_copy(dst=m, src=m_new)

            pT_psum = nl.ndarray((T, T), nl.float32, buffer=nl.psum)
            nisa.nc_transpose(dst=pT_psum, data=p)               # key index on the partitions
            pT = nl.ndarray((T, T), v.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=pT, src=pT_psum)
            pv = nl.ndarray((T, D), nl.float32, buffer=nl.psum)
            nisa.nc_matmul(pv, pT, v_tile)                       # p·v
            nisa.tensor_scalar(dst=acc, data=acc, op0=nl.multiply, operand0=alpha)
            nisa.tensor_tensor(dst=acc, data1=acc, data2=pv, op=nl.add)

        inv_l = nl.ndarray((T, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=inv_l, op=nl.reciprocal, data=l_sum)
        out_tile = nl.ndarray((T, D), q.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=out_tile, data=acc, op0=nl.multiply, operand0=inv_l)
        nisa.dma_copy(dst=o[b, i * T:(i + 1) * T, :], src=out_tile)
        log_l = nl.ndarray((T, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=log_l, op=nl.log, data=l_sum)
        lse_tile = nl.ndarray((T, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=lse_tile, data1=log_l, data2=m, op=nl.add)
        nisa.dma_copy(dst=lse[b, i * T:(i + 1) * T], src=lse_tile)
    return o, lse


def flash_attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple:
    """[B, H, S, D] -> (o [B, H, S, D], lse [B, H, S]) through the kernel."""
    B, H, S, D = q.shape
    flat = [t.reshape(B * H, S, D) for t in (q, k, v)]
    o, lse = torch_neuronx.wrap_nki(flash_fwd)[B * H](*flat, 1.0 / math.sqrt(D))
    return o.reshape(B, H, S, D), lse.reshape(B, H, S)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return flash_attention_forward(q, k, v)[0]


flash_attention = torch_neuronx.nki_op("nki_examples::flash_attention", _attention)


def _setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _backward(ctx, grad):
    # The reference: PyTorch's causal attention, differentiated.
    q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)
    with torch.enable_grad():
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return torch.autograd.grad(ref, (q, k, v), grad)


flash_attention.register_autograd(_backward, setup_context=_setup)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, S, C = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(B, S, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        y = flash_attention(q.contiguous(), k.contiguous(), v.contiguous())
        x = x + self.proj(y.transpose(1, 2).reshape(B, S, C))
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 64, dim: int = 64, heads: int = 2, seq: int = 128) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(seq, dim))
        self.block = Block(dim, heads)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(self.embed(tokens) + self.pos[: tokens.shape[1]]))


def train(steps: int = 3, device: str = "neuron", seed: int = 0) -> list:
    torch.manual_seed(seed)
    model = TinyLM().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(0, 64, (2, 129), generator=g).to(device)
    losses = []
    for _ in range(steps):
        logits = model(data[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), data[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main() -> None:
    q, k, v = (torch.randn(1, 2, 256, 64, device="neuron") for _ in range(3))
    o, lse = flash_attention_forward(q, k, v)
    torch.testing.assert_close(o, F.scaled_dot_product_attention(q, k, v, is_causal=True), rtol=1e-4, atol=1e-4)
    print("flash attention kernel matches SDPA (causal)")
    losses = train()
    print("TinyLM with the NKI attention, losses:", [round(x, 4) for x in losses])


if __name__ == "__main__":
    main()
