"""The public names do not move when the package's rooms do: everything a user
imported from torch_neuron_sim before it was laid out by concept still imports,
as the same object (docs/architecture.md, "The package, by concept")."""
import importlib
import subprocess
import sys

import pytest
import torch

import torch_neuron_sim

# old module path -> where it lives now
MOVED = {
    "streams": "device.streams", "stream_check": "device.stream_check", "random": "device.random",
    "cuda_map": "device.cuda_map", "fault_injection": "memory.fault_injection", "tracking": "execution.tracking",
    "dtype_policy": "execution.dtype_policy", "compile_cache": "execution.compile_cache",
    "native_ops": "execution.native_ops", "metrics": "torch_neuronx.metrics", "neuron": "torch_neuronx.neuron",
    "estimate": "profiler.estimate", "report_html": "report.page", "torch_neuronx_utils": "torch_neuronx.utils",
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_module_paths_import_the_same_module(old):
    assert importlib.import_module(f"torch_neuron_sim.{old}") is importlib.import_module(f"torch_neuron_sim.{MOVED[old]}")


def test_package_attributes_users_reach():
    t = torch_neuron_sim
    assert torch.neuron is t.neuron and torch.neuron.memory is t.memory
    assert t.streams.launch_blocking() in (True, False)
    assert callable(t.stream_check.check_stream_order) and callable(t.random.set_rng_source)
    assert t.estimate.__module__ == "torch_neuron_sim.profiler.estimate"
    from torch_neuron_sim.report import Report, report
    assert report is t.report and Report.__module__ == "torch_neuron_sim.report.report"


def test_old_paths_import_in_a_fresh_process():
    """`import torch_neuron_sim.metrics` and friends as the first import of a program."""
    code = ("import torch_neuron_sim.metrics as m, torch_neuron_sim.dtype_policy as d\n"
            "from torch_neuron_sim.stream_check import check_stream_order\n"
            "from torch_neuron_sim.native_ops import extend\n"
            "import torch_neuron_sim\n"
            "assert m is torch_neuron_sim.metrics and d is torch_neuron_sim.dtype_policy\n"
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
