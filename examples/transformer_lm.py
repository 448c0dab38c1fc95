"""A small transformer language model trained for a few steps, in plain
device-agnostic PyTorch: it runs on whatever accelerator torch.accelerator
reports (`neuron` with torch_neuron_sim installed, CUDA on a GPU box) and on
the CPU otherwise. Nothing here knows about Trainium; run it under the
migration report to see what it would meet there:

    python -m torch_neuron_sim report examples/transformer_lm.py --steps 5
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

TEXT = ("The NeuronCore runs the ops it knows natively; every other op leaves the device, "
        "runs on the host and comes back. A migration report lists them before the hardware does. ") * 8


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self, vocab: int, dim: int = 64, heads: int = 4, layers: int = 2, context: int = 32):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        self.blocks = nn.Sequential(*(Block(dim, heads) for _ in range(layers)))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        return self.head(self.ln(self.blocks(x)))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--context", type=int, default=32)
    p.add_argument("--generate", type=int, default=16, help="characters to sample after training")
    args = p.parse_args()

    device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")
    torch.manual_seed(0)
    chars = sorted(set(TEXT))
    data = torch.tensor([chars.index(c) for c in TEXT])  # int64 token ids, as tokenizers produce
    model = TinyLM(len(chars), context=args.context).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    print(f"training a {sum(p.numel() for p in model.parameters()):,}-parameter transformer LM on {device}")
    for step in range(args.steps):
        starts = torch.randint(0, len(data) - args.context - 1, (args.batch,))
        x = torch.stack([data[s:s + args.context] for s in starts]).to(device)
        y = torch.stack([data[s + 1:s + args.context + 1] for s in starts]).to(device)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        print(f"step {step}: loss {loss.item():.3f} (uniform guess: {math.log(len(chars)):.3f})")

    # Sample a few characters: generation grows the sequence one token at a time.
    model.eval()
    idx = x[:1, :8]
    with torch.no_grad():
        for _ in range(args.generate):
            logits = model(idx[:, -args.context:])[:, -1]
            nxt = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)
            idx = torch.cat([idx, nxt], dim=1)
    print("sample:", repr("".join(chars[i] for i in idx[0].tolist())))


if __name__ == "__main__":
    main()
