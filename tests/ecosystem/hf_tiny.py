"""A tiny GPT-2 built from a config (no hub download), a fixed token data set,
and a Trainer over them: what the ecosystem tests train, on `neuron` as
transformers picks it and on the CPU with use_cpu=True."""
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

VOCAB, SEQ = 96, 16


def tiny_gpt2(seed: int = 0, dropout: float = 0.0) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                        resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout)
    return GPT2LMHeadModel(config)


class TokenDataset(torch.utils.data.Dataset):
    """Random token sequences, the same every run; each one is its own label (causal LM)."""

    def __init__(self, n: int = 64, seed: int = 1) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, VOCAB, (n, SEQ), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def make_trainer(output_dir: str, steps: int = 8, model=None, **kwargs) -> Trainer:
    options = dict(output_dir=output_dir, per_device_train_batch_size=4, max_steps=steps, learning_rate=1e-3,
                   logging_steps=1, report_to=[], save_strategy="no", seed=0, dataloader_num_workers=0,
                   disable_tqdm=True)
    options.update(kwargs)
    return Trainer(model=model if model is not None else tiny_gpt2(), args=TrainingArguments(**options),
                   train_dataset=TokenDataset())


def losses(trainer: Trainer) -> list:
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]
