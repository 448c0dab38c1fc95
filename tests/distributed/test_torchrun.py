"""torchrun: one node, two "nodes" on 127.0.0.1, too many processes per node,
and a restart after a crash. Every run has a hard timeout."""
import importlib.util
import os
import re
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from dist_harness import free_port

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(ROOT, "examples", "ddp_train.py")


def _example():
    spec = importlib.util.spec_from_file_location("ddp_train", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reference():
    m = _example()
    model = m.build_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    out = []
    for x, y in m.batches():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def torchrun(*args, env=None, timeout=150):
    full = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    # the checkout after what is already on the path: a run against another torch puts the
    # package built for that torch there (scripts/test_torch_version.py)
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [full.get("PYTHONPATH"), ROOT]))
    return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *args], env=full, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc, timeout=150) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"torchrun did not finish in {timeout}s:\n{out}")
    return out


def losses(out: str) -> list[float]:
    return [float(v) for v in re.findall(r"step \d+ loss ([0-9.]+)", out)]


def test_single_node_with_a_restart_after_a_crash(reference):
    script = os.path.join(ROOT, "tests", "distributed", "torchrun_restart.py")
    port = free_port()
    proc = torchrun("--nproc_per_node=2", "--max-restarts=1", "--rdzv_backend=c10d",
                    f"--rdzv_endpoint=127.0.0.1:{port}", "--monitor-interval=0.2", script)
    out = finish(proc)
    assert proc.returncode == 0, out
    # both ranks started twice: the job was restarted after rank 1's crash, and the second
    # attempt trained (the script prints its losses once, from rank 0)
    started = re.findall(r"attempt (\d) rank (\d) started", out)
    assert sorted(started) == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")], out
    assert losses(out) == pytest.approx(reference, rel=1e-4), out
    assert "c10d::allreduce_" in out, out


def test_two_nodes_on_one_machine_train_as_one_world(reference):
    port = free_port()
    common = ["--nnodes=2", "--nproc_per_node=1", "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}",
              "--rdzv_id=twonodes"]
    node0 = torchrun(*common, "--node_rank=0", EXAMPLE)
    node1 = torchrun(*common, "--node_rank=1", EXAMPLE)
    out0, out1 = finish(node0), finish(node1)
    assert node0.returncode == 0 and node1.returncode == 0, out0 + out1
    assert losses(out0 + out1) == pytest.approx(reference, rel=1e-4), out0 + out1


def test_more_processes_than_devices_is_a_clear_error():
    port = free_port()
    proc = torchrun("--nproc_per_node=2", "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", EXAMPLE,
                    env={"NEURON_RT_NUM_CORES": "1"})
    out = finish(proc)
    assert proc.returncode != 0
    assert "Device index 1 is out of range. Valid range is 0 to 0" in out, out
    assert "--nproc_per_node=1" in out, out


def test_pipeline_example_trains_like_one_process():
    path = os.path.join(ROOT, "examples", "pipeline_train.py")
    spec = importlib.util.spec_from_file_location("pipeline_train", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    model = m.build_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    reference = []
    for x, y in m.batches():
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        reference.append(loss.item())
    port = free_port()
    proc = torchrun("--nproc_per_node=2", "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", path,
                    "--schedule", "1F1B")
    out = finish(proc)
    assert proc.returncode == 0, out
    assert losses(out) == pytest.approx(reference, rel=1e-5), out
    assert "c10d::send" in out and "c10d::recv_" in out, out
