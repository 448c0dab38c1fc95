"""The native-op table: every entry names a real operator overload, the
default table is the one loaded, and docs/native-ops.md is its rendering."""
from pathlib import Path

import pytest
import torch

import torch_neuron_sim
from torch_neuron_sim import native_ops
from torch_neuron_sim.execution.native_ops import render


@pytest.fixture(autouse=True)
def default_native_ops():
    """These tests rely on the default table; other tests may have changed it."""
    torch_neuron_sim.native_ops.load()


ROOT = Path(__file__).resolve().parents[2]


def test_doc_is_the_rendered_table():
    doc = ROOT / "docs" / "native-ops.md"
    assert doc.read_text() == render.render(), (
        "docs/native-ops.md is stale: python -m torch_neuron_sim.execution.native_ops.render > docs/native-ops.md")


def test_every_entry_is_a_real_overload():
    names = native_ops.read_table(native_ops._HERE / f"{native_ops.DEFAULT_TABLE}.txt")
    missing = []
    for name in names:
        base, _, overload = name.partition(".")
        try:
            torch._C._dispatch_find_schema_or_throw(base, overload)
        except RuntimeError:
            missing.append(name)
    assert missing == []
    assert len(names) == len(set(names))


def test_default_table_is_loaded_at_import():
    from conftest import run_python

    r = run_python("""
        import torch_neuron_sim as tns
        print(tns.native_ops.version(), len(tns.native_ops.current()),
              "aten::_grouped_mm" in tns.native_ops.current(), "aten::argsort.stable" in tns.native_ops.current())
    """, {"NEURON_SIM_NATIVE_OPS": ""})
    assert r.returncode == 0, r.stderr
    n = len(native_ops.read_table(native_ops._HERE / f"{native_ops.DEFAULT_TABLE}.txt"))
    assert r.stdout.split() == ["torchneuron-2.14-beta", str(n), "True", "True"]
    assert len(torch_neuron_sim.tracking.untracked_op_names()) == 37


def test_table_from_the_environment_replaces_the_default(tmp_path):
    from conftest import run_python

    table = tmp_path / "my-release.txt"
    table.write_text("# a release with two native ops\naten::add.Tensor\nmul.Tensor\n")
    r = run_python("""
        import torch, torch_neuron_sim as tns
        print(tns.native_ops.version(), tns.native_ops.current())
        x = torch.ones(3, device="neuron")
        (x + x) * x
        x - x
        print(tns.get_executed_ops(), tns.get_fallback_ops())
    """, {"NEURON_SIM_NATIVE_OPS": str(table)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["my-release ['aten::add.Tensor', 'aten::mul.Tensor']",
                                     # the overloads that ran, and the device's allocation kernels;
                                     # torch.ones' fill_ is not in a two-op table
                                     "['aten::add.Tensor', 'aten::empty', 'aten::empty_strided', 'aten::mul.Tensor'] "
                                     "['aten::fill_.Scalar', 'aten::sub.Tensor']"]  # sub's functional kernel (structured fallback)


def test_argsort_stable_runs_natively_and_untracked(tracked):
    # A C++ kernel of the device that records nothing, as there (docs/op-tracking.md).
    x = torch.randn(10)
    assert torch.equal(torch.argsort(x.to("neuron"), stable=True).cpu(), torch.argsort(x, stable=True))
    assert "aten::argsort.stable" not in tracked.get_op_counts()  # neither executed nor fallen back
    assert not any("argsort" in n for n in tracked.get_executed_ops()) and tracked.get_fallback_ops() == []
