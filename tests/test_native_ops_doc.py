"""The native-op table: every entry names a real operator overload, the
default table is the one loaded, and docs/native-ops.md is its rendering."""
from pathlib import Path

import pytest
import torch

import torch_neuron_sim
from torch_neuron_sim import native_ops
from torch_neuron_sim.native_ops import render


@pytest.fixture(autouse=True)
def default_native_ops():
    """These tests rely on the default table; other tests may have changed it."""
    torch_neuron_sim.native_ops.load()


ROOT = Path(__file__).resolve().parent.parent


def test_doc_is_the_rendered_table():
    doc = ROOT / "docs" / "native-ops.md"
    assert doc.read_text() == render.render(), (
        "docs/native-ops.md is stale: python -m torch_neuron_sim.native_ops.render > docs/native-ops.md")


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


def test_default_table_is_loaded():
    assert native_ops.version() == "torchneuron-2.14-beta"
    assert "aten::_grouped_mm" in native_ops.current() and "aten::argsort.stable" in native_ops.current()
    assert len(torch_neuron_sim._C._untracked_op_names()) == 37


def test_argsort_stable_runs_natively(tracked):
    x = torch.randn(10)
    assert torch.equal(torch.argsort(x.to("neuron"), stable=True).cpu(), torch.argsort(x, stable=True))
    assert tracked.get_op_counts() == {"aten::argsort.stable": {"executed": 1, "fallback": 0}}
