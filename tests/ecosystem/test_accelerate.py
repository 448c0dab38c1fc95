"""accelerate, unmodified: Accelerator() is on neuron, trains like Accelerator(cpu=True),
saves and restores the device's RNG state with its checkpoint, and
`accelerate launch --num_processes 2` runs DistributedType.MULTI_NEURON DDP to the end."""
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from conftest import run_python

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = {"PYTHONPATH": HERE + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1",
       "HF_HUB_OFFLINE": "1"}


def test_accelerator_is_on_neuron_trains_like_the_cpu_and_restores_the_device_rng(tmp_path):
    r = run_python(f"""
        import json, pickle
        import torch, torch.nn.functional as F
        from accelerate import Accelerator
        from accelerate_ddp_worker import build
        out = {{}}
        for name, cpu in (("neuron", False), ("cpu", True)):
            accelerator = Accelerator(cpu=cpu)
            model, loader, optimizer = accelerator.prepare(*build())
            losses = []
            for xb, yb in loader:
                loss = F.cross_entropy(model(xb), yb)
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
                losses.append(loss.item())
            out[name] = {{"device": str(accelerator.device), "type": str(accelerator.distributed_type),
                         "losses": losses, "params": sorted({{str(p.device) for p in model.parameters()}})}}
            if name == "neuron":
                # save_state keeps torch.neuron.get_rng_state_all(); load_state puts it back
                accelerator.save_state({str(tmp_path)!r})
                after_save = torch.rand(4, device="neuron").tolist()
                torch.rand(100, device="neuron")
                accelerator.load_state({str(tmp_path)!r})
                out["rng"] = [after_save, torch.rand(4, device="neuron").tolist()]
                with open({str(tmp_path)!r} + "/random_states_0.pkl", "rb") as f:
                    states = torch.load(f, weights_only=False)
                out["saved_keys"] = sorted(states)
                out["saved_neuron"] = [len(s) for s in states["torch_neuron_manual_seed"]]
                out["device_count"] = torch.neuron.device_count()
            accelerator.free_memory()
            from accelerate.state import AcceleratorState, PartialState
            AcceleratorState._reset_state(True)
        print(json.dumps(out))
    """, env={**ENV, "HF_HOME": str(tmp_path / "hf")})
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.splitlines()[-1])
    # a single process: accelerate's device is torch.device("neuron"), the current device
    assert out["neuron"]["device"] == "neuron" and out["neuron"]["type"] == "DistributedType.NO"
    assert out["neuron"]["params"] == ["neuron:0"]
    assert out["cpu"]["device"] == "cpu"
    assert out["neuron"]["losses"] == pytest.approx(out["cpu"]["losses"], rel=1e-5, abs=1e-6)
    assert "torch_neuron_manual_seed" in out["saved_keys"]
    assert out["saved_neuron"] == [16] * out["device_count"]  # one 16-byte (seed, offset) state per device
    assert out["rng"][0] == out["rng"][1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_reference_checksum() -> float:
    # The two ranks' batches of 8, averaged by DDP, are one batch of 16 in the same order.
    spec = importlib.util.spec_from_file_location("accelerate_ddp_worker", os.path.join(HERE, "accelerate_ddp_worker.py"))
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    model, loader, optimizer = worker.build(batch_size=16)
    for xb, yb in loader:
        F.cross_entropy(model(xb), yb).backward()
        optimizer.step()
        optimizer.zero_grad()
    return sum(p.detach().double().sum().item() for p in model.parameters())


def test_accelerate_launch_two_processes_runs_multi_neuron_ddp_to_the_end(tmp_path):
    env = {**os.environ, **ENV, "HF_HOME": str(tmp_path / "hf")}
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", "--multi_gpu",
           "--main_process_port", str(free_port()), os.path.join(HERE, "accelerate_ddp_worker.py")]
    proc = subprocess.Popen(cmd, env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        out, _ = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"accelerate launch did not finish in 300 s:\n{out}")
    assert proc.returncode == 0, out
    started = sorted(re.findall(r"rank (\d) of 2 DistributedType.MULTI_NEURON (neuron:\d) DistributedDataParallel neuron",
                                out))
    assert started == [("0", "neuron:0"), ("1", "neuron:1")], out
    done = re.findall(r"rank \d done loss ([0-9.]+) checksum (-?[0-9.]+)", out)
    assert len(done) == 2 and done[0] == done[1], out  # the replicas stayed identical
    assert float(done[0][1]) == pytest.approx(_cpu_reference_checksum(), rel=1e-6, abs=1e-6)
