"""Tiny Hugging Face models (built from configs: no download) trained through
torch.compile on neuron against Inductor on the CPU: compiled forward,
backward and AdamW steps give the CPU's losses, with no graph run op by op
and no op falling back to the CPU inside a compiled graph. Dropout is 0 so
the two devices' random streams do not enter the losses (random ops in
compiled graphs: test_compile_random_and_shapes.py). Most of the cost is
Inductor compiling each model's graphs twice (neuron and CPU): one layer and
two steps by default, two layers and four steps with NEURON_SIM_LONG_RUN=deep.
`make test` sweeps a decoder (GPT-2: permuted and expanded views into the
compiled graphs) and an encoder with its collator (BERT masked-LM: padding,
attention and token-type masks, stride-0 inputs into the backward); T5, Llama,
ViT and a Mixtral-style MoE join them in `make test-deep`, each compiling for
minutes on a two-core machine (one MoE block trains compiled in `make test`:
test_compile_launch_lowering.py)."""
import copy
import os

import pytest
import torch
import torch._dynamo

import torch_neuron_sim
from torch_neuron_sim.compile import compiler, graphs

import transformers  # noqa: E402  (a test extra, installed by make setup)
from transformers import DataCollatorForLanguageModeling  # noqa: E402

DEEP = os.environ.get("NEURON_SIM_LONG_RUN") == "deep"
LAYERS, STEPS = (2, 4) if DEEP else (1, 2)
V = 96  # vocabulary
_TOKENIZER = None  # (tokenizer, corpus) of the BERT example, built on first use
SMALL = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_attention_heads=2, num_hidden_layers=LAYERS)


def gpt2():
    cfg = transformers.GPT2Config(vocab_size=V, n_embd=32, n_layer=LAYERS, n_head=2, n_positions=32, resid_pdrop=0.0,
                                  embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(cfg), _causal_batch


def llama():
    cfg = transformers.LlamaConfig(**SMALL, num_key_value_heads=1, max_position_embeddings=32)
    return transformers.LlamaForCausalLM(cfg), _causal_batch


def bert_mlm():
    global _TOKENIZER
    _TOKENIZER = _TOKENIZER or _bert_tokenizer()
    cfg = transformers.BertConfig(**{**SMALL, "vocab_size": len(_TOKENIZER[0])}, pad_token_id=0, max_position_embeddings=32, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0, attn_implementation="eager")
    return transformers.BertForMaskedLM(cfg), _mlm_batch


def t5():
    cfg = transformers.T5Config(vocab_size=V, d_model=32, d_kv=16, d_ff=64, num_layers=LAYERS, num_heads=2,
                                dropout_rate=0.0, decoder_start_token_id=0)
    return transformers.T5ForConditionalGeneration(cfg), _seq2seq_batch


def vit():
    cfg = transformers.ViTConfig(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_hidden_layers=LAYERS,
                                 image_size=16, patch_size=8, num_labels=3, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0)
    return transformers.ViTForImageClassification(cfg), _image_batch


def mixtral():
    """A Mixtral-style MoE: top-2 routing over 4 experts; transformers' grouped-mm experts sort the
    tokens by expert (a stable sort) and run custom ops, forward and backward, inside the graphs."""
    cfg = transformers.MixtralConfig(**SMALL, num_key_value_heads=1, max_position_embeddings=32, num_local_experts=4,
                                     num_experts_per_tok=2)
    return transformers.MixtralForCausalLM(cfg), _causal_batch


def _causal_batch(g):
    ids = torch.randint(0, V, (2, 12), generator=g)
    return {"input_ids": ids, "labels": ids}


def _bert_tokenizer():
    """The WordPiece tokenizer of examples/bert_mlm_pretrain.py, built from its local vocabulary (no download)."""
    import importlib.util
    import os
    import tempfile

    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "bert_mlm_pretrain.py")
    spec = importlib.util.spec_from_file_location("bert_mlm_pretrain", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    with tempfile.TemporaryDirectory() as d:
        return script.tokenizer(d), script.corpus


def _mlm_batch(g):
    """Sentences tokenized, padded to one length and masked by DataCollatorForLanguageModeling, as a
    masked-LM pretraining script feeds BERT (input_ids, token_type_ids, attention_mask, labels)."""
    tok, corpus = _TOKENIZER
    collator = DataCollatorForLanguageModeling(tok, mlm_probability=0.3, pad_to_multiple_of=16,
                                               seed=int(torch.randint(0, 99, (1,), generator=g)))
    texts = corpus(2, seed=int(torch.randint(0, 99, (1,), generator=g)))
    return dict(collator([tok(t, truncation=True, max_length=16) for t in texts]))


def _seq2seq_batch(g):
    return {"input_ids": torch.randint(0, V, (2, 10), generator=g), "labels": torch.randint(0, V, (2, 6), generator=g)}


def _image_batch(g):
    return {"pixel_values": torch.randn(2, 3, 16, 16, generator=g), "labels": torch.randint(0, 3, (2,), generator=g)}


def _train(model, batches, device, steps_fallbacks):
    model = model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step = torch.compile(model, backend="neuron" if device == "neuron" else "inductor")
    losses = []
    for batch in batches:
        batch = {k: v.to(device) for k, v in batch.items()}
        torch_neuron_sim.clear_op_tracking()
        loss = step(**batch).loss
        loss.backward()
        steps_fallbacks.append(torch_neuron_sim.get_fallback_ops())  # forward and backward graphs only
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


MODELS = [bert_mlm, gpt2] + ([t5, llama, vit, mixtral] if DEEP else [])


@pytest.mark.parametrize("build", MODELS, ids=lambda f: f.__name__)
def test_compiled_training_on_neuron_equals_inductor_on_the_cpu(build, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff"))
    torch._dynamo.reset()
    compiler.clear_memory_cache()
    graphs.clear()
    torch.manual_seed(0)
    model, make_batch = build()
    g = torch.Generator().manual_seed(1)
    batches = [make_batch(g) for _ in range(STEPS)]
    cpu_losses = _train(copy.deepcopy(model), batches, "cpu", [])
    fallbacks = []
    neuron_losses = _train(model, batches, "neuron", fallbacks)
    torch.testing.assert_close(neuron_losses, cpu_losses, rtol=1e-4, atol=1e-4)
    records = graphs.records()
    assert {r.kind for r in records} >= {"forward", "backward"}
    assert [(r.name, r.executor) for r in records if r.executor != "inductor"] == []  # no graph run op by op
    assert fallbacks == [[]] * len(batches)
