"""Op-tracking names as TorchNeuron records them: executed ops under the overload that
ran (or the registration the device reaches instead), fallbacks under theirs, the
device helpers' name matching, the rules file rendered in the docs, and the names the
torch-mlir op set (TORCH_NEURONX_MLIR_ATEN_OPS) selects. Written as a torch_neuronx user
writes tests: through the alias, with the device's own helpers."""
import sys

import pytest
import torch
import torch.nn.functional as F

import torch_neuron_sim
from torch_neuron_sim.testing import assert_op_falls_back_on_cpu, assert_op_runs_on_neuron, check_op_runs_on_neuron, track_neuron_ops
from torch_neuronx_user import D, torch_neuronx, copy_entry_points_restored, neuronx_alias  # noqa: F401 (fixtures)


def test_executed_ops_are_recorded_under_the_overload_that_ran():
    x = torch.randn(4, 3, device=D)
    y = torch.randn(4, 3, device=D)
    torch_neuronx.clear_op_tracking()
    torch.where(x > 0, x, y)
    x + y
    x.sum(0)
    torch.relu(x)
    x / y
    F.softmax(x, dim=1)
    x.masked_fill(x > 0, 0.0)
    ran = set(torch_neuronx.get_executed_ops())
    assert {"aten::gt.Scalar_out", "aten::where.self", "aten::add.Tensor", "aten::sum.dim_IntList", "aten::relu",
            "aten::div.out", "aten::_softmax", "aten::masked_fill_.Scalar"} <= ran
    assert not any(n.endswith(".default") for n in ran)
    assert "aten::div.Tensor" not in ran and "aten::softmax.int" not in ran
    assert torch_neuronx.get_fallback_ops() == []


def test_cxx_kernels_record_fixed_base_names_and_views_stay_untracked():
    torch_neuronx.clear_op_tracking()
    x = torch.empty(4, device=D).fill_(1.0)
    x.new_empty(2)
    x.clone()
    x.sum().item()
    x.view(2, 2)
    x.view(2, 2).t()
    torch.argsort(x, stable=True)
    z = torch.empty(0, device=D)
    z.set_(x)
    z.resize_(2)
    ran = set(torch_neuronx.get_executed_ops())
    assert {"aten::empty", "aten::new_empty", "aten::clone", "aten::_local_scalar_dense", "aten::set_",
            "aten::resize_"} <= ran
    assert not any(n.startswith(("aten::view", "aten::argsort", "aten::t", "aten::unsqueeze")) for n in ran)
    assert torch_neuronx.get_fallback_ops() == []


def test_fallbacks_are_recorded_with_their_overload():
    x = torch.randn(4, 3, device=D)
    torch_neuronx.clear_op_tracking()
    torch.kthvalue(x, 2, 0)
    x.std(0)
    assert {"aten::kthvalue.values", "aten::std.correction"} <= set(torch_neuronx.get_fallback_ops())


def test_helpers_match_names_as_the_device_helpers_do():
    x = torch.randn(4, device=D)
    with track_neuron_ops():
        x / x
        torch.kthvalue(x, 2, 0)
    assert_op_runs_on_neuron("aten::div.out")  # exact
    assert_op_runs_on_neuron("aten::div")  # the base name is contained in "aten::div.out"
    assert_op_falls_back_on_cpu("aten::kthvalue.values")
    assert not check_op_runs_on_neuron("aten::kthvalue.values")  # an exact fallback entry fails
    with pytest.raises(AssertionError, match="to fall back"):
        assert_op_falls_back_on_cpu("aten::kthvalue")  # falling back needs the exact recorded name


def test_tracking_rules_are_data_rendered_in_the_docs():
    from pathlib import Path

    from torch_neuron_sim.execution.native_ops import render_rules

    page = Path(__file__).resolve().parents[2] / "docs" / "op-tracking.md"
    assert page.read_text() == render_rules.render()
    rules = torch_neuron_sim.native_ops.read_rules()
    assert ("record", "aten::div.Tensor", "aten::div.out") in [r[:3] for r in rules]


def test_tracking_names_follow_the_torch_mlir_op_set_import_selects():
    # TORCH_NEURONX_MLIR_ATEN_OPS=1, set on import, selects the torch-mlir registrations: clamp
    # with tensor bounds and the out= forms of eye/zeros run on the device under their own
    # overloads; the in-place clamp_ reaches the registered out= kernel. A fresh process, as
    # a user's program starts: the variable unset, then the import.
    import json
    import os
    import subprocess

    code = """
        import json, os, torch, torch_neuron_sim
        torch_neuron_sim.install_torch_neuronx_alias()
        import torch_neuronx
        from torch_neuron_sim.testing import check_op_runs_on_neuron
        D = "neuron"
        xc = torch.randn(4, 4)
        loc, hic = torch.full((4, 4), -0.5), torch.full((4, 1), 0.5)
        x, lo, hi = xc.to(D), loc.to(D), hic.to(D)
        ones = torch.ones(2, 3, device=D)  # zeros(out=) must overwrite it
        cases = [
            ("aten::clamp.Tensor", lambda: torch.clamp(x, lo, hi), torch.clamp(xc, loc, hic)),
            ("aten::clamp.Tensor", lambda: x.clamp(min=lo), xc.clamp(min=loc)),
            ("aten::clamp.Tensor_out", lambda: torch.clamp(x, lo, hi, out=torch.empty(4, 4, device=D)),
             torch.clamp(xc, loc, hic)),
            ("aten::clamp.Tensor_out", lambda: x.clone().clamp_(lo, hi), torch.clamp(xc, loc, hic)),
            ("aten::clamp", lambda: torch.clamp(x, -0.5, 0.5), torch.clamp(xc, -0.5, 0.5)),
            ("aten::eye.out", lambda: torch.eye(3, out=torch.empty(3, 3, device=D)), torch.eye(3)),
            ("aten::eye.m_out", lambda: torch.eye(3, 5, out=torch.empty(3, 5, device=D)), torch.eye(3, 5)),
            ("aten::eye.m", lambda: torch.eye(3, 5, device=D), torch.eye(3, 5)),
            ("aten::zeros.out", lambda: torch.zeros(2, 3, out=ones), torch.zeros(2, 3)),
            ("aten::zeros", lambda: torch.zeros(2, 3, device=D), torch.zeros(2, 3)),
        ]
        results = []
        for name, run, expected in cases:
            torch_neuronx.clear_op_tracking()
            got = run()
            results.append([name, check_op_runs_on_neuron(name), sorted(torch_neuronx.get_executed_ops()),
                            torch_neuronx.get_fallback_ops(), got.device.type == "neuron"
                            and torch.equal(got.cpu(), expected)])
        print(json.dumps([os.environ["TORCH_NEURONX_MLIR_ATEN_OPS"], torch_neuronx.utils.use_mlir_aten_ops(),
                          results]))
    """
    env = {k: v for k, v in os.environ.items() if k != "TORCH_NEURONX_MLIR_ATEN_OPS"}
    out = subprocess.run([sys.executable, "-c", __import__("textwrap").dedent(code)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    value, mlir, results = json.loads(out.stdout.splitlines()[-1])
    assert value == "1" and mlir is True
    for name, runs, executed, fallbacks, equal in results:
        assert runs and fallbacks == [], (name, executed, fallbacks)
        assert set(executed) - {name, "aten::empty", "aten::clone"} == set(), (name, executed)
        assert equal, name
