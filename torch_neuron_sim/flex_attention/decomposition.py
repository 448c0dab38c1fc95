"""FlexAttention's forward and backward as ordinary ATen ops.

`flex_attention` reaches a backend as two higher-order ops: `flex_attention`
(query, key, value, score_mod, block mask, scale, ...) -> (out, lse, max) and
`flex_attention_backward`. CUDA and the CPU generate a fused kernel for each;
the device has none, so both are written here in ops it runs natively
(matmuls, exp/log, amax/sum, where, comparisons): the scores are computed in
float32, `score_mod` and `mask_mod` are applied to the whole score matrix by
vmapping them over (batch, head, q_idx, kv_idx) - they are written for one
scalar score, and vmap turns each op they call into its batched form - and
the softmax is taken with the row maximum subtracted. The same two functions
serve eager mode (registered as the higher-order ops' kernels for the device)
and torch.compile (traced into the graph in their place: compile/flex_attention.py).

Conventions of the higher-order ops, which the callers rely on: the
log-sum-exp and the row maxima are returned in base 2 (`flex_attention`
multiplies them by ln 2 before returning them to the user); a row whose every
score is masked has output 0 and log-sum-exp -inf; grouped-query attention
shares each key/value head among Hq // Hkv consecutive query heads; a key/value
batch of 1 is broadcast over the query batch.

Memory: the decomposition materialises the (B, Hq, L, S) score matrix (and,
in the backward, a few of its size), as PyTorch's own unfused path does."""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

_LN2 = math.log(2.0)


def _vmap_bhqkv(fn: Callable, prefix: tuple, suffix: tuple, out_dims: Any = 0) -> Callable:
    """fn written for scalar (b, h, q_idx, kv_idx) applied to every index:
    one vmap per dimension, innermost kv_idx. `prefix` are the in_dims of the
    arguments before the four indices (the score: batched in every
    dimension), `suffix` those after them (captured buffers: None)."""
    dims = [(None, None, None, 0), (None, None, 0, None), (None, 0, None, None), (0, None, None, None)]
    for index_dims in dims:
        in_dims = prefix + index_dims + suffix
        fn = torch.vmap(fn, in_dims=in_dims, out_dims=out_dims)
    return fn


def _indices(scores: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(torch.arange(0, scores.size(i), device=scores.device) for i in range(4))


def _grouped(x: torch.Tensor, hkv: int) -> torch.Tensor:
    """(B, Hq, L, D) as (B, Hkv, G*L, D): query heads hkv*G .. hkv*G+G-1 share
    key/value head hkv, so one batched matmul per key/value head serves the
    whole group (no copy of the keys and values, unlike repeat_interleave)."""
    b, hq, l, d = x.shape
    return x.reshape(b, hkv, (hq // hkv) * l, d)


def _ungrouped(x: torch.Tensor, hq: int) -> torch.Tensor:
    b, hkv, gl, d = x.shape
    return x.reshape(b, hq, gl // (hq // hkv), d)


def _broadcast_batch(query: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    bq, bkv = query.size(0), t.size(0)
    if bq != bkv and not (bq > 1 and bkv == 1):
        raise RuntimeError(f"FlexAttention: the key/value batch must equal the query batch or be 1; got Bq={bq}, "
                           f"Bkv={bkv}")
    return t.expand((bq, *t.shape[1:]))


def _laid_out_like(t: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """t in ref's dimension order with the last dimension innermost: the layout
    the higher-order ops' meta kernels give their results (the output like the
    query, each gradient like its input). A compiled graph is traced with those
    strides and its compiled backward asserts them on what the forward saved."""
    last = ref.dim() - 1
    order = [i for i in sorted(range(ref.dim()), key=ref.stride, reverse=True) if i != last] + [last]
    return t.permute(order).contiguous().permute([order.index(i) for i in range(len(order))])


def _masked_scores(query, key, score_mod, block_mask, scale, score_mod_other_buffers, mask_mod_other_buffers):
    """scores = q·kᵀ·scale in float32 (B, Hq, L, S), and the same after
    score_mod with masked positions at -inf; also the mask."""
    from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex

    hq, hkv = query.size(1), key.size(1)
    work = torch.float64 if query.dtype == torch.float64 else torch.float32
    scores = _ungrouped(torch.matmul(_grouped(query.to(work), hkv), key.to(work).transpose(-2, -1)), hq)
    scores = scores * scale
    b, h, m, n = _indices(scores)
    mask_mod = _vmap_bhqkv(block_mask[-1], prefix=(), suffix=(None,) * len(mask_mod_other_buffers))
    score_fn = _vmap_bhqkv(score_mod, prefix=(0,), suffix=(None,) * len(score_mod_other_buffers))
    with TransformGetItemToIndex():  # buffer[q_idx] inside the mods: an index op vmap can batch
        mask = mask_mod(b, h, m, n, *mask_mod_other_buffers)
        modded = score_fn(scores, b, h, m, n, *score_mod_other_buffers)
    post = torch.where(mask, modded, torch.full((), -math.inf, dtype=work, device=scores.device))
    return scores, post, mask, (b, h, m, n)


def flex_attention_forward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, score_mod: Callable,
                           block_mask: tuple, scale: float, kernel_options: dict,
                           score_mod_other_buffers: tuple = (), mask_mod_other_buffers: tuple = ()):
    """(out, lse / ln 2, max / ln 2), as the `flex_attention` higher-order op returns them."""
    key = _broadcast_batch(query, key)
    value = _broadcast_batch(query, value)
    hq, hkv = query.size(1), key.size(1)
    _, post, _, _ = _masked_scores(query, key, score_mod, block_mask, scale, score_mod_other_buffers,
                                   mask_mod_other_buffers)
    row_max = torch.amax(post, dim=-1, keepdim=True)
    masked_row = row_max == -math.inf  # every score of the row masked
    shift = torch.where(masked_row, torch.zeros_like(row_max), row_max)
    e = torch.exp(post - shift)  # masked scores: exp(-inf) = 0
    denom = torch.sum(e, dim=-1, keepdim=True)
    lse = torch.log(denom) + shift  # -inf on fully masked rows
    probs = e / torch.where(masked_row, torch.ones_like(denom), denom)  # fully masked rows: 0
    out = _ungrouped(torch.matmul(_grouped(probs.to(query.dtype), hkv), value.to(query.dtype)), hq)
    return _laid_out_like(out, query), lse.squeeze(-1) / _LN2, row_max.squeeze(-1) / _LN2


def flex_attention_backward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, out: torch.Tensor,
                            logsumexp: torch.Tensor, grad_out: torch.Tensor | None,
                            grad_logsumexp: torch.Tensor | None, fw_graph: Callable, joint_graph: Callable | None,
                            block_mask: tuple, scale: float, kernel_options: dict,
                            score_mod_other_buffers: tuple = (), mask_mod_other_buffers: tuple = ()):
    """(grad_query, grad_key, grad_value, grads of score_mod's captured
    buffers), as the `flex_attention_backward` higher-order op returns them.
    `logsumexp` is the forward's (base 2); `joint_graph` is score_mod's
    backward (score, b, h, q_idx, kv_idx, grad, *buffers) -> grads."""
    if query.dtype != key.dtype or query.dtype != value.dtype:
        raise ValueError(f"FlexAttention backward needs one dtype for query, key and value; got query "
                         f"{query.dtype}, key {key.dtype}, value {value.dtype}")
    from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex

    bkv = key.size(0)
    key_in, value_in = key, value
    key = _broadcast_batch(query, key)
    value = _broadcast_batch(query, value)
    hq, hkv = query.size(1), key.size(1)
    if grad_out is None:
        grad_out = torch.zeros_like(out)
    scores, post, mask, (b, h, m, n) = _masked_scores(query, key, fw_graph, block_mask, scale,
                                                      score_mod_other_buffers, mask_mod_other_buffers)
    work = scores.dtype
    lse = (logsumexp * _LN2).unsqueeze(-1)
    masked_row = lse == -math.inf
    probs = torch.exp(post - torch.where(masked_row, torch.zeros_like(lse), lse))
    probs = torch.where(masked_row, torch.zeros_like(probs), probs)
    # dV = Pᵀ·dO, summed over each key/value head's query group by the grouped matmul.
    grad_value = torch.matmul(_grouped(probs.to(query.dtype), hkv).transpose(-2, -1), _grouped(grad_out, hkv))
    grad_probs = _ungrouped(torch.matmul(_grouped(grad_out.to(work), hkv), value.to(work).transpose(-2, -1)), hq)
    delta = torch.sum(out.to(work) * grad_out.to(work), dim=-1, keepdim=True)
    grad_post = probs * (grad_probs - delta)
    if grad_logsumexp is not None:  # lse = ln Σ exp: its gradient is the softmax (base 2 → natural)
        grad_post = grad_post + probs * (grad_logsumexp / _LN2).unsqueeze(-1)
    nbuf = len(score_mod_other_buffers)
    if joint_graph is None:
        grad_scores, buffer_grads = grad_post, (None,) * nbuf
    else:
        joint = _vmap_bhqkv(joint_graph, prefix=(0,), suffix=(0,) + (None,) * nbuf,
                            out_dims=[0, None, None, None, None] + [None] * nbuf)
        with TransformGetItemToIndex():
            grad_scores, _, _, _, _, *buffer_grads = joint(scores, b, h, m, n, grad_post, *score_mod_other_buffers)
    grad_scores = torch.where(mask, grad_scores * scale, torch.zeros((), dtype=work, device=scores.device))
    grad_scores = _grouped(grad_scores.to(query.dtype), hkv)
    grad_query = _laid_out_like(_ungrouped(torch.matmul(grad_scores, key), hq), query)
    grad_key = _laid_out_like(torch.matmul(grad_scores.transpose(-2, -1), _grouped(query, hkv)), key_in)
    grad_value = _laid_out_like(grad_value, value_in)
    if bkv != query.size(0):  # a broadcast key/value batch: sum its gradients over the query batch
        grad_key = grad_key.sum(0, keepdim=True)
        grad_value = grad_value.sum(0, keepdim=True)
    buffer_grads = tuple(g if isinstance(buf, torch.Tensor) and buf.requires_grad else None
                         for g, buf in zip(buffer_grads, score_mod_other_buffers))
    return grad_query, grad_key, grad_value, buffer_grads
