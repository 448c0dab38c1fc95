"""BERT masked-LM pretraining in the style of the public Trainium scripts,
written for the native backend and run here as written: it never imports
torch_neuronx or the emulator (torch autoloads the device).

    python examples/bert_mlm_pretrain.py --out /tmp/bert                          # one device
    torchrun --nproc_per_node=2 examples/bert_mlm_pretrain.py --out /tmp/bert     # DDP on 2 ranks
    torchrun --nproc_per_node=2 examples/bert_mlm_pretrain.py --fsdp --out /tmp/bert   # FSDP2
    ... --device cpu                                                               # the same on the CPU (gloo)

BertForMaskedLM built from a config in bf16, a WordPiece tokenizer built from a
local vocabulary (no hub download), DataCollatorForLanguageModeling,
DistributedSampler, AdamW, clip_grad_norm_, save_pretrained. Rank 0 prints
`step N loss X` (the mean over ranks) and finally checks that the checkpoint
loads back into BertForMaskedLM with the trained weights.
"""
import argparse
import os
import random
import tempfile

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler
from transformers import BertConfig, BertForMaskedLM, BertTokenizer, DataCollatorForLanguageModeling

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ("the a neuron core trains reads writes fast slow model data graph tensor device host memory "
         "layer weight bias token batch step loss grad sum mean small large red blue green one two three "
         "runs on off and or not").split()


def tokenizer(directory: str) -> BertTokenizer:
    """A WordPiece tokenizer loaded from a local directory holding only its vocabulary: no download."""
    with open(os.path.join(directory, "vocab.txt"), "w") as f:
        f.write("\n".join(SPECIAL + WORDS) + "\n")
    return BertTokenizer.from_pretrained(directory, do_lower_case=True)


def corpus(n: int, seed: int) -> list:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))) for _ in range(n)]


def model_config(tok: BertTokenizer, dropout: float) -> BertConfig:
    return BertConfig(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=128, max_position_embeddings=32, hidden_dropout_prob=dropout,
                      attention_probs_dropout_prob=dropout, pad_token_id=tok.pad_token_id)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="neuron", choices=["neuron", "cpu"])
    p.add_argument("--fsdp", action="store_true", help="FSDP2 (fully_shard) instead of DDP under torchrun")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=8, help="per rank")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="save_pretrained directory (default: a temporary one)")
    args = p.parse_args()

    distributed = "WORLD_SIZE" in os.environ
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if args.device == "neuron":
        torch.neuron.set_device(local_rank)
        device = torch.device(f"neuron:{local_rank}")
    else:
        device = torch.device("cpu")
    if distributed:
        dist.init_process_group("neuron" if args.device == "neuron" else "gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)

    work = tempfile.mkdtemp()
    tok = tokenizer(work)
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = BertForMaskedLM(model_config(tok, args.dropout)).to(torch.bfloat16).to(device)
    if distributed and args.fsdp:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh(device.type, (world,))
        for layer in model.bert.encoder.layer:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        trained = model
    elif distributed:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=None)
        trained = model.module
    else:
        trained = model

    texts = corpus(args.steps * args.batch * world, seed=1)
    data = [tok(t, truncation=True, max_length=32) for t in texts]
    collator = DataCollatorForLanguageModeling(tokenizer=tok, mlm_probability=0.15)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    sampler.set_epoch(0)
    loader = DataLoader(data, batch_size=args.batch, sampler=sampler, collate_fn=collator)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    torch.manual_seed(args.seed + 1 + rank)  # the collator's masks: per rank, the same on every device

    model.train()
    for step, batch in enumerate(loader):
        batch = {k: v.to(device) for k, v in batch.items()}
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        optimizer.zero_grad()
        logged = loss.detach().float()
        if distributed:
            dist.all_reduce(logged)
            logged /= world
        if rank == 0:
            print(f"step {step} loss {logged.item():.5f}", flush=True)

    if distributed and args.fsdp:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
        state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    else:
        state = {k: v.cpu() for k, v in trained.state_dict().items()}
    out = args.out or os.path.join(work, "checkpoint")
    if rank == 0:
        trained.save_pretrained(out, state_dict=state)
        loaded = BertForMaskedLM.from_pretrained(out, dtype=torch.bfloat16)
        reloaded = loaded.state_dict()
        same = all(torch.equal(reloaded[k], v) for k, v in state.items() if k in reloaded)
        print(f"saved {out} reloaded {'equal' if same else 'DIFFERENT'} {len(reloaded)} tensors", flush=True)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
