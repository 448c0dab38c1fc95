"""transformers.Trainer, unmodified, on a tiny GPT-2: it finds `neuron:0` with
nothing but `import transformers` (the emulator is autoloaded by torch and found
through find_spec("torch_neuronx")), trains like use_cpu=True, compiles with the
backend transformers picks for the device, and resumes from its checkpoint."""
import json
import os

import pytest

from conftest import run_python

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = {"PYTHONPATH": HERE + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1",
       "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}


def run_json(code: str, tmp_path, timeout: int = 600) -> dict:
    r = run_python(code, env={**ENV, "HF_HOME": str(tmp_path / "hf")}, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def test_trainer_trains_on_neuron_with_nothing_but_import_transformers(tmp_path):
    out = run_json(f"""
        import json
        import transformers  # no torch_neuron_sim import, no alias call
        import torch
        from hf_tiny import make_trainer, losses
        result = {{}}
        for name, extra in (("neuron", {{}}), ("cpu", {{"use_cpu": True}})):
            trainer = make_trainer({str(tmp_path)!r} + "/" + name, **extra)
            trainer.train()
            result[name] = {{"device": str(trainer.args.device), "losses": losses(trainer),
                            "params": sorted({{str(p.device) for p in trainer.model.parameters()}})}}
        import torch_neuronx
        result["native_ops"] = len(torch_neuronx.get_executed_ops())
        print(json.dumps(result))
    """, tmp_path)
    assert out["neuron"]["device"] == "neuron:0" and out["neuron"]["params"] == ["neuron:0"]
    assert out["cpu"]["device"] == "cpu" and out["cpu"]["params"] == ["cpu"]
    assert out["native_ops"] > 20
    assert len(out["neuron"]["losses"]) == 8
    assert out["neuron"]["losses"] == pytest.approx(out["cpu"]["losses"], rel=1e-4, abs=1e-5)
    assert out["neuron"]["losses"][-1] < out["neuron"]["losses"][0]  # it learns


def test_trainer_torch_compile_picks_the_neuron_backend_and_trains_like_the_cpu(tmp_path):
    # transformers chooses torch_compile_backend="neuron" for the device (dynamic=False, as for the real
    # backend); the compiled steps must give the eager CPU run's losses.
    out = run_json(f"""
        import json
        import transformers
        import torch
        from hf_tiny import make_trainer, losses
        cpu = make_trainer({str(tmp_path)!r} + "/cpu", use_cpu=True)
        cpu.train()
        trainer = make_trainer({str(tmp_path)!r} + "/neuron", torch_compile=True)
        trainer.train()
        import torch_neuronx
        print(json.dumps({{"backend": trainer.args.torch_compile_backend, "device": str(trainer.args.device),
                          "graphs": len(torch_neuronx.get_dynamo_metrics()),
                          "losses": losses(trainer), "cpu": losses(cpu)}}))
    """, tmp_path)
    assert out["backend"] == "neuron" and out["device"] == "neuron:0"
    assert out["graphs"] >= 1  # the steps ran through graphs the neuron backend compiled
    assert out["losses"] == pytest.approx(out["cpu"], rel=1e-3, abs=1e-4)


@pytest.mark.parametrize("first", ["torch", "transformers.trainer"])
def test_trainer_checkpoint_resume_on_neuron_continues_the_uninterrupted_run(tmp_path, first):
    # Train 8 steps with dropout, checkpointing at step 4; a new Trainer resumed from that checkpoint
    # gives the uninterrupted run's last 4 losses: weights, optimizer, scheduler, data order and the RNG
    # states all come back, the neuron generator's among them (dropout on neuron draws from it; without
    # it the resumed run replays the first steps' masks). Either import order: transformers.trainer
    # imported before torch (so before the emulator is loaded) or after.
    head = "import torch" if first == "torch" else "from transformers import Trainer"
    out = run_json(f"""
        {head}
        import json, os
        import torch
        from hf_tiny import make_trainer, losses, tiny_gpt2
        root = {str(tmp_path)!r}
        straight = make_trainer(root + "/run", model=tiny_gpt2(dropout=0.1), save_strategy="steps", save_steps=4)
        straight.train()
        saved = sorted(os.listdir(root + "/run/checkpoint-4"))
        state = torch.load(root + "/run/checkpoint-4/rng_state.pth", weights_only=False)["neuron"]
        resumed = make_trainer(root + "/run", model=tiny_gpt2(dropout=0.1))
        resumed.train(resume_from_checkpoint=root + "/run/checkpoint-4")
        print(json.dumps({{"straight": losses(straight), "saved": saved, "neuron_state": state.tolist(),
                          "resumed": [h["loss"] for h in resumed.state.log_history if "loss" in h and h["step"] > 4],
                          "device": str(resumed.args.device),
                          "params": sorted({{str(p.device) for p in resumed.model.parameters()}})}}))
    """, tmp_path)
    assert out["device"] == "neuron:0" and out["params"] == ["neuron:0"]
    assert "rng_state.pth" in out["saved"] and "optimizer.pt" in out["saved"]
    seed, offset = (int.from_bytes(bytes(out["neuron_state"][i:i + 8]), "little") for i in (0, 8))
    assert seed == 0 and offset > 0  # the Trainer's seed, and the numbers 4 steps of dropout drew
    assert len(out["resumed"]) == 4
    assert out["resumed"] == pytest.approx(out["straight"][4:], rel=1e-5, abs=1e-6)
