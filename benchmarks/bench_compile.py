"""torch.compile(backend="neuron") against eager neuron and against Inductor
on the CPU, one training step (forward, backward, SGD), measured in one run.

Models: an MLP (three Linear layers with GELU) and a small pre-norm transformer
block (LayerNorm, 4-head causal attention, GELU MLP), both matmul-bound; the
block in train mode with dropout (random ops in the compiled graphs); the tiny
BERT masked-LM step of examples/bert_mlm_pretrain.py (its tokenizer and
DataCollatorForLanguageModeling, dropout 0.1, AdamW); and a
small MLP (64 wide, batch 16) whose step is overhead-bound: per-op dispatch,
Dynamo's guards, the launch wrappers and the autograd engine cost more than
its arithmetic, the case a single-launch compiled graph is meant for. For
each: the time of a warm training step (Dynamo and Inductor caches warm) with
  compiled neuron   torch.compile(model, backend="neuron")   (Inductor executor)
  eager neuron      the same model, not compiled
  compiled CPU      torch.compile(model) on the CPU          (Inductor)
  eager CPU         the same model on the CPU, not compiled
and the ratios compiled neuron / eager neuron (aim <= 0.8x), compiled neuron
/ compiled CPU (aim <= 1.1x; <= 1.2x for the overhead-bound small MLP, whose
step is mostly per-launch work around a few microseconds of kernels), and compiled CPU / eager CPU (no aim: what
Inductor gains over eager on the CPU for the same step, the ceiling of the
neuron gain, since the neuron executor runs Inductor's CPU kernels and the
same matmul library), best and median of interleaved batches. The cold
compile time (first step of the compiled neuron model, forward and backward
graphs; Inductor's on-disk caches make later runs faster) is a row too, and
so is the cost of a recompile: the training step compiled for a second batch
size after the first, against that batch size compiled first by a fresh
compiler (both with the compile caches off, so each is a whole compilation;
aim: the recompile costs no more).
benchmarks/run_all.py puts these rows in docs/benchmarks.md and the README.

--breakdown prints where a step's time goes instead: per phase (forward with
its loss, zero_grad, backward, optimizer step), the time inside Inductor's
compiled graphs, and the neuron executor's own per-launch work around them;
with --write-doc it also rewrites that section of docs/compile.md (between
its breakdown markers), so the page shows figures of a run, not typed ones.

Usage: python benchmarks/bench_compile.py [--repeats N] [--threads T] [--breakdown [--write-doc]] [--model NAME]
(--model recompile: the recompile row alone)
"""
import datetime
import os
import statistics
import time
from pathlib import Path

import torch

import torch_neuron_sim  # noqa: F401  (registers the device)
from timing import Row, cli

GROUP, GAIN_GROUP, CPU_GROUP, COLD_GROUP = "compile", "compile-gain", "compile-cpu", "compile-cold"
RECOMPILE_GROUP = "compile-recompile"


class MLP(torch.nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, 4 * d),
                                       torch.nn.GELU(), torch.nn.Linear(4 * d, d))

    def forward(self, x):
        return self.net(x)


class SmallMLP(torch.nn.Module):
    """MLP 64-64-64-64: arithmetic is negligible, overheads are the step. Its
    own class, not an MLP(d=64): Dynamo keys recompiles by the forward's code,
    so a second input shape through MLP.forward would be automatic dynamic,
    which the neuron backend refuses (docs/compile.md, Static shapes)."""

    def __init__(self, d=64):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(d, d), torch.nn.GELU(), torch.nn.Linear(d, d),
                                       torch.nn.GELU(), torch.nn.Linear(d, d))

    def forward(self, x):
        return self.net(x)


class Block(torch.nn.Module):
    def __init__(self, d=128, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class DropoutBlock(Block):
    """The transformer block in train mode with dropout after attention and
    the MLP: the compiled graphs hold random ops (docs/compile.md, Random ops)."""

    def __init__(self, d=128, heads=4, p=0.1):
        super().__init__(d, heads)
        self.drop = torch.nn.Dropout(p)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.proj(a.transpose(1, 2).reshape(b, t, d)))
        return x + self.drop(self.mlp(self.ln2(x)))


class BertMaskedLM(torch.nn.Module):
    """The tiny BERT of examples/bert_mlm_pretrain.py (fp32, dropout 0.1, eager
    attention); forward returns the masked-LM loss. Its batch: bert_batch."""

    def __init__(self):
        super().__init__()
        from transformers import BertForMaskedLM
        script, tok = _bert_example()
        self.bert = BertForMaskedLM(script.model_config(tok, dropout=0.1))

    def forward(self, input_ids, token_type_ids, attention_mask, labels):
        return self.bert(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                         labels=labels).loss


def _bert_example():
    """The example script as a module, and its tokenizer (built from its local vocabulary)."""
    import importlib.util
    import tempfile
    path = Path(__file__).resolve().parent.parent / "examples" / "bert_mlm_pretrain.py"
    spec = importlib.util.spec_from_file_location("bert_mlm_pretrain", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    with tempfile.TemporaryDirectory() as d:
        return script, script.tokenizer(d)


def bert_batch(batch: int = 8, length: int = 32) -> tuple:
    """Sentences of the example's corpus, tokenized, padded to `length` and
    masked by DataCollatorForLanguageModeling (15%), once: the same tensors on both sides."""
    from transformers import DataCollatorForLanguageModeling
    script, tok = _bert_example()
    collator = DataCollatorForLanguageModeling(tokenizer=tok, mlm_probability=0.15, pad_to_multiple_of=length, seed=0)
    b = collator([tok(t, truncation=True, max_length=length) for t in script.corpus(batch, seed=1)])
    return tuple(b[k] for k in ("input_ids", "token_type_ids", "attention_mask", "labels"))


# Models whose forward returns the loss: their input is their batch (a tuple), with no target.
BATCHES = {BertMaskedLM: bert_batch}


def inputs(make_model, shape):
    """(x, y) on the CPU: a random input and target, or the model's own batch and no target."""
    torch.manual_seed(0)
    if make_model in BATCHES:
        return BATCHES[make_model](), None
    return torch.randn(*shape), torch.randn(*shape)


def to(t, device):
    if t is None:
        return None
    return tuple(a.to(device) for a in t) if isinstance(t, tuple) else t.to(device)


def forward_loss(model):
    """What a training script compiles: the forward and its loss, as one
    function (a model whose forward returns its loss is compiled as it is)."""
    if type(model) in BATCHES:
        return model

    def model_and_loss(x, y):
        return torch.nn.functional.mse_loss(model(x), y)
    return model_and_loss


def loss_of(run, x, y):
    return run(*x) if isinstance(x, tuple) else run(x, y)


def make_step(model, run, x, y):
    opt = (torch.optim.AdamW if isinstance(x, tuple) else torch.optim.SGD)(model.parameters(), lr=1e-3)

    def step():
        loss = loss_of(run, x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    return step


def timed(step, inner):
    t0 = time.perf_counter()
    for _ in range(inner):
        step()
    return (time.perf_counter() - t0) / inner


VARIANTS = (("compiled neuron", "neuron", "neuron"), ("eager neuron", "neuron", None),
            ("compiled cpu", "cpu", "inductor"), ("eager cpu", "cpu", None))


def bench(name, make_model, shape, repeats, inner, aim):
    x_cpu, y_cpu = inputs(make_model, shape)
    steps = {}
    cold = None
    for label, device, compiled in VARIANTS:
        torch.manual_seed(0)
        model = make_model().to(device)
        run = torch.compile(forward_loss(model), backend=compiled) if compiled else forward_loss(model)
        step = make_step(model, run, to(x_cpu, device), to(y_cpu, device))
        t0 = time.perf_counter()
        step()  # compiles (cold) on the first call
        if label == "compiled neuron":
            cold = time.perf_counter() - t0
        step()
        steps[label] = step
    times = {k: [] for k in steps}
    for _ in range(repeats):
        for k, s in steps.items():
            times[k].append(timed(s, inner))
    best = {k: min(v) for k, v in times.items()}
    med = {k: statistics.median(v) for k, v in times.items()}
    rows = [Row(GROUP, f"{name}: compiled neuron vs compiled CPU", best["compiled neuron"], best["compiled cpu"],
                best["compiled neuron"] / best["compiled cpu"],
                med["compiled neuron"] / med["compiled cpu"], aim),
            Row(GAIN_GROUP, f"{name}: compiled neuron vs eager neuron", best["compiled neuron"],
                best["eager neuron"], best["compiled neuron"] / best["eager neuron"],
                med["compiled neuron"] / med["eager neuron"], 0.8),
            Row(CPU_GROUP, f"{name}: compiled CPU vs eager CPU", best["compiled cpu"], best["eager cpu"],
                best["compiled cpu"] / best["eager cpu"], med["compiled cpu"] / med["eager cpu"], None),
            Row(COLD_GROUP, f"{name}: first compiled step (cold Inductor compile)", cold, best["compiled neuron"],
                cold / best["compiled neuron"], cold / med["compiled neuron"], None)]
    for r in rows:
        print(r.line(), flush=True)
    return rows


# (name, model, input shape, steps per timed batch, aim of compiled neuron / compiled CPU)
MODELS = (("MLP 256-1024-1024-256, batch 64", MLP, (64, 256), 10, 1.1),
          ("transformer block d=128 h=4, batch 8x64", Block, (8, 64, 128), 5, 1.1),
          ("transformer block with dropout 0.1 (train), batch 8x64", DropoutBlock, (8, 64, 128), 5, 1.15),
          ("BERT masked-LM d=64 2 layers, dropout 0.1 (train), batch 8x32, AdamW", BertMaskedLM, None, 5, 1.15),
          ("small MLP 64-64-64-64, batch 16 (overhead-bound)", SmallMLP, (16, 64), 100, 1.2))


class RecompiledMLP(MLP):
    """MLP with a forward of its own: Dynamo keys its compiled code by the code object."""

    def forward(self, x):
        return self.net(x)


def compile_seconds(batches: list[int]) -> list[float]:
    """Seconds of the first compiled neuron training step at each batch size in
    turn, with one fresh compiler and model (the first size compiles, each
    later one recompiles). Dynamo is reset, and Inductor's FX graph cache and
    the compiled-graph caches are off or empty: each is a whole compilation."""
    import tempfile

    import torch._dynamo
    import torch._inductor.config as inductor_config

    from torch_neuron_sim.compile import compiler
    torch._dynamo.reset()
    compiler.clear_memory_cache()
    torch.manual_seed(0)
    model = RecompiledMLP().to("neuron")
    run = torch.compile(forward_loss(model), backend="neuron")
    out = []
    saved = os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR")
    with tempfile.TemporaryDirectory() as neff, inductor_config.patch(fx_graph_cache=False):
        os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = neff
        try:
            for b in batches:
                x = torch.randn(b, 256, device="neuron")
                step = make_step(model, run, x, torch.randn_like(x))
                t0 = time.perf_counter()
                step()
                out.append(time.perf_counter() - t0)
        finally:
            if saved is None:
                os.environ.pop("TORCH_NEURONX_NEFF_CACHE_DIR", None)
            else:
                os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = saved
    torch._dynamo.reset()
    return out


def recompile_cost(repeats: int) -> Row:
    """A second batch size (48 after 64) recompiles the step: it should cost
    no more than compiling batch 48 first. Alternated, so load hits both alike."""
    again, first = [], []
    for _ in range(repeats):
        again.append(compile_seconds([64, 48])[1])
        first.append(compile_seconds([48])[0])
    row = Row(RECOMPILE_GROUP, "MLP 256-1024-1024-256 step, batch 48 after 64: recompile vs first compile",
              min(again), min(first), min(again) / min(first), statistics.median(again) / statistics.median(first),
              1.0)
    print(row.line(), flush=True)
    return row


def run(repeats: int = 9) -> list[Row]:
    rows = []
    for name, make_model, shape, inner, aim in MODELS:
        rows += bench(name, make_model, shape, repeats, inner, aim)
    rows.append(recompile_cost(max(2, repeats // 3)))
    return rows


CALLER_THREAD = "compiled neuron, 1 thread"  # breakdown only: the backward on the caller's thread


def breakdown(name, make_model, shape, repeats, inner):
    """Median microseconds of CPU time (all threads of the process: the
    backward runs on the autograd engine's device thread for neuron) per phase
    of one step, per variant, with the CPU time inside Inductor's compiled
    graphs and the neuron executor's own launch work (executors.Launch around
    the graph, the graph excluded); and the step's wall time. CPU time leaves
    out the time other processes hold the CPU, which on a shared machine is
    most of a small step's wall time."""
    from torch._inductor import output_code

    from torch_neuron_sim.compile import executors
    clock = time.process_time
    spent = {"graph": 0.0, "launch": 0.0}

    def timing(cls, key):
        call = cls.__call__

        def timed_call(self, args):
            t0 = clock()
            try:
                return call(self, args)
            finally:
                spent[key] += clock() - t0
        cls.__call__ = timed_call
        return call
    graph_call, launch_call = timing(output_code.CompiledFxGraph, "graph"), timing(executors.Launch, "launch")
    try:
        x_cpu, y_cpu = inputs(make_model, shape)
        variants = {}
        for label, device, compiled in VARIANTS:
            torch.manual_seed(0)
            model = make_model().to(device)
            run_ = torch.compile(forward_loss(model), backend=compiled) if compiled else forward_loss(model)
            variants[label] = (run_, torch.optim.SGD(model.parameters(), lr=1e-3), to(x_cpu, device), to(y_cpu, device))
        # The same compiled neuron step with autograd's multithreading off: the
        # backward then runs on the caller's thread, as the CPU's does, so the
        # difference to "compiled neuron" is what the engine's device-thread
        # hand-off costs (the device keeps that thread, as CUDA does).
        variants[CALLER_THREAD] = variants["compiled neuron"]

        def phases(run_, opt, x, y):
            w0, t0 = time.perf_counter(), clock()
            loss = loss_of(run_, x, y)
            t1 = clock()
            opt.zero_grad(set_to_none=True)
            t2 = clock()
            loss.backward()
            t3 = clock()
            opt.step()
            t4 = clock()
            return [t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0, time.perf_counter() - w0]
        def measured(label, v):
            with torch.autograd.set_multithreading_enabled(label != CALLER_THREAD):
                return phases(*v)
        for k, v in variants.items():
            measured(k, v), measured(k, v)
        per = {k: [] for k in variants}
        for _ in range(repeats):
            for k, v in variants.items():
                for _ in range(inner):
                    spent["graph"] = spent["launch"] = 0.0
                    p = measured(k, v)
                    per[k].append(p + [spent["graph"], spent["launch"] - spent["graph"] if spent["launch"] else 0.0])
    finally:
        output_code.CompiledFxGraph.__call__, executors.Launch.__call__ = graph_call, launch_call
    cols = ("forward+loss", "zero_grad", "backward", "opt.step", "step", "step wall", "in graphs", "launch work")
    med = {k: [statistics.median(r[i] for r in v) for i in range(len(cols))] for k, v in per.items()}
    lines = [f"{name}: median us per step, CPU time except 'step wall' (load average {os.getloadavg()[0]:.1f})",
             f"  {'':26s}" + "".join(f"{c:>12s}" for c in cols)]
    lines += [f"  {k:26s}" + "".join(f"{m * 1e6:12.0f}" for m in ms) for k, ms in med.items()]
    step, graphs = cols.index("step"), cols.index("in graphs")
    lines.append("  inside the compiled graphs: " + ", ".join(
        f"{k} {med[k][graphs] / med[k][step]:.0%} of the step" for k in ("compiled neuron", "compiled cpu")))
    print("\n".join(lines), flush=True)
    return lines


DOC = Path(__file__).resolve().parent.parent / "docs" / "compile.md"
DOC_START = "<!-- compile breakdown: start (python benchmarks/bench_compile.py --breakdown --write-doc writes this) -->"
DOC_END = "<!-- compile breakdown: end -->"


def write_doc(blocks: list[list[str]], threads: int) -> None:
    """Replaces docs/compile.md's breakdown section with this run's output."""
    text = DOC.read_text()
    if DOC_START not in text or DOC_END not in text:
        raise SystemExit(f"{DOC}: no breakdown markers ({DOC_START!r} ... {DOC_END!r})")
    head, rest = text.split(DOC_START, 1)
    body = (f"Measured {datetime.date.today().isoformat()}, {os.cpu_count()} CPUs, {threads} torch thread(s), "
            f"the load average in each title:\n\n```\n" + "\n\n".join("\n".join(b) for b in blocks) + "\n```\n")
    DOC.write_text(head + DOC_START + "\n" + body + DOC_END + rest.split(DOC_END, 1)[1])
    print(f"wrote the breakdown into {DOC.name}", flush=True)


def main():
    args = cli(9, breakdown=(bool, False, "where a step's time goes, per phase and variant"),
               model=(str, "", "only the models whose name contains this (e.g. small, MLP, block)"),
               write_doc=(bool, False, "with --breakdown and every model: rewrite docs/compile.md's breakdown"))
    models = [m for m in MODELS if args.model in m[0]]
    if args.write_doc and (not args.breakdown or models != list(MODELS)):
        raise SystemExit("--write-doc needs --breakdown and every model (no --model)")
    blocks = []
    for name, make_model, shape, inner, aim in models:
        if args.breakdown:
            blocks.append(breakdown(name, make_model, shape, args.repeats, max(1, inner // 5)))
        else:
            bench(name, make_model, shape, args.repeats, inner, aim)
    if not args.breakdown and args.model in "recompile":  # every model, or --model recompile
        recompile_cost(max(2, args.repeats // 3))
    if args.write_doc:
        write_doc(blocks, args.threads)


if __name__ == "__main__":
    main()
