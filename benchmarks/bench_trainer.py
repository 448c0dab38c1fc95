"""transformers.Trainer on `neuron` against use_cpu=True, a tiny GPT-2 (2 layers,
width 32, built from a config), in one run: batches alternate the two sides.

Rows (neuron / CPU, seconds per training step, 20 steps a batch after 3 warm-up steps):
  - the Trainer step (what a user's run takes per step)   aim <= 1.3x
  - the model step alone: the same forward, backward, clip_grad_norm_ and fused
    AdamW step (Trainer's default optimizer) in a plain loop, no Trainer
and a table of the Trainer's own share of a step on each side (Trainer step
minus model step: its data loading, scheduler, logging and callbacks).
benchmarks/run_all.py puts these in docs/benchmarks.md and the README.

Usage: python benchmarks/bench_trainer.py [--repeats N] [--steps S] [--threads T]
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time

import torch
import transformers
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

from timing import Row, Table, cli

GROUP, OVERHEAD_GROUP = "trainer", "trainer-overhead"
WARMUP = 3
VOCAB, SEQ, BATCH = 96, 16, 4


def tiny_gpt2() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        self.ids = torch.randint(0, VOCAB, (n, SEQ), generator=torch.Generator().manual_seed(1))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class StepClock(TrainerCallback):
    """Each training step's wall time, from step begin to step end."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._t0 = 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self._t0 = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if args.device.type == "neuron":
            torch.neuron.synchronize()
        self.times.append(time.perf_counter() - self._t0)


def trainer_step(device: str, steps: int, workdir: str) -> float:
    """Mean seconds per Trainer step after the warm-up steps."""
    clock = StepClock()
    args = TrainingArguments(output_dir=workdir, per_device_train_batch_size=BATCH, max_steps=WARMUP + steps,
                             learning_rate=1e-3, logging_steps=10**6, report_to=[], save_strategy="no", seed=0,
                             dataloader_num_workers=0, disable_tqdm=True, use_cpu=device == "cpu")
    trainer = Trainer(model=tiny_gpt2(), args=args, train_dataset=Tokens(BATCH * (WARMUP + steps)),
                      callbacks=[clock])
    assert trainer.args.device.type == device, trainer.args.device
    trainer.train()
    return statistics.mean(clock.times[WARMUP:])


def model_step(device: str, steps: int) -> float:
    """Mean seconds per plain-loop step: forward, backward, clip_grad_norm_, AdamW."""
    model = tiny_gpt2().to(device)
    # Trainer's default optimizer (optim="adamw_torch_fused" since torch 2.8): the same update on both sides
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    data = [b.to(device) for b in Tokens(BATCH * (WARMUP + steps)).ids.split(BATCH)]
    times = []
    for ids in data:
        t0 = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        loss.item()  # the Trainer reads the loss back each step too
        times.append(time.perf_counter() - t0)
    return statistics.mean(times[WARMUP:])


def _row(name: str, n: list, c: list, aim: float | None) -> Row:
    row = Row(GROUP, name, min(n), min(c), min(n) / min(c), statistics.median(n) / statistics.median(c), aim)
    print(row.line(), flush=True)
    return row


def run(repeats: int = 5, steps: int = 20) -> list:
    transformers.logging.set_verbosity_error()
    print(f"tiny GPT-2 (2 layers, width 32), batch {BATCH} x {SEQ} tokens, AdamW; {steps} steps a batch "
          f"after {WARMUP} warm-up steps; transformers {transformers.__version__}")
    tn, tc, mn, mc = [], [], [], []
    with tempfile.TemporaryDirectory() as work:
        for _ in range(repeats):
            tn.append(trainer_step("neuron", steps, os.path.join(work, "n")))
            tc.append(trainer_step("cpu", steps, os.path.join(work, "c")))
            mn.append(model_step("neuron", steps))
            mc.append(model_step("cpu", steps))
    rows: list = [_row("Trainer step, tiny GPT-2", tn, tc, 1.3),
                  _row("model step alone (no Trainer), tiny GPT-2", mn, mc, None)]
    table = Table(OVERHEAD_GROUP, ["side", "Trainer step (median)", "model step (median)", "Trainer's own share"])
    for side, t, m in (("neuron", tn, mn), ("CPU", tc, mc)):
        share = statistics.median(t) - statistics.median(m)
        table.add(side, f"{statistics.median(t) * 1e3:.2f} ms", f"{statistics.median(m) * 1e3:.2f} ms",
                  f"{share * 1e3:.2f} ms ({share / statistics.median(t):.0%})")
    rows.append(table)
    return rows


def main() -> None:
    args = cli(5, steps=(int, 20, "training steps per batch after the warm-up"))
    run(args.repeats, args.steps)


if __name__ == "__main__":
    main()
