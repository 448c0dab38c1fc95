"""examples/bert_mlm_pretrain.py, a script written for the native backend (it never
imports torch_neuronx), trains on `neuron` as on the CPU: one device, DDP and
FSDP2 on 2 ranks under torchrun, and its save_pretrained checkpoint loads back."""
import os
import re
import socket
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "examples", "bert_mlm_pretrain.py")
BF16 = dict(rel=2e-2, abs=2e-2)  # a bf16 model: the device's fp32 collectives and the CPU's bf16 ones round apart


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(tmp_path, device, *launcher, extra=()) -> list:
    out_dir = tmp_path / f"{device}-{'-'.join(extra) or 'single'}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
           "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    cmd = [sys.executable, *launcher, SCRIPT, "--device", device, "--dropout", "0", "--out", str(out_dir), *extra]
    try:
        r = subprocess.run(cmd, env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} did not finish in 300 s:\n{e.stdout}\n{e.stderr}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(rf"saved {re.escape(str(out_dir))} reloaded equal \d+ tensors", r.stdout), r.stdout
    assert (out_dir / "config.json").exists() and (out_dir / "model.safetensors").exists()
    return [float(v) for v in re.findall(r"step \d+ loss ([0-9.]+)", r.stdout)]


def torchrun() -> list:
    return ["-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={free_port()}"]


def test_bert_mlm_on_one_neuron_device_trains_like_the_cpu(tmp_path):
    neuron, cpu = run(tmp_path, "neuron"), run(tmp_path, "cpu")
    assert len(neuron) == 6
    assert neuron == pytest.approx(cpu, **BF16)


@pytest.mark.parametrize("parallel", [[], ["--fsdp"]], ids=["ddp", "fsdp2"])
def test_bert_mlm_on_two_ranks_under_torchrun_trains_like_the_cpu(tmp_path, parallel):
    neuron = run(tmp_path, "neuron", *torchrun(), extra=tuple(parallel))
    cpu = run(tmp_path, "cpu", *torchrun(), extra=tuple(parallel))
    assert len(neuron) == 6
    assert neuron == pytest.approx(cpu, **BF16)
