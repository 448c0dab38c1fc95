"""The PyTorch versions the release ships for (torch_neuron_sim/torch_versions.py):
the running torch is one of them and picks its row, the native-op table comes from
that row, and the Makefile, pyproject.toml and the README name the same versions."""
import re
import warnings
from pathlib import Path

import torch

from torch_neuron_sim import torch_versions
from torch_neuron_sim.execution import native_ops

ROOT = Path(__file__).resolve().parents[2]


def test_running_torch_is_a_release_version_and_picks_its_row():
    row = torch_versions.current()
    assert row is torch_versions.RELEASES[torch_versions.torch_minor()]
    assert torch.__version__.split("+")[0] == row.tested
    assert native_ops.DEFAULT_TABLE == row.native_ops
    assert (native_ops._HERE / f"{row.native_ops}.txt").exists()
    assert torch_versions.torch_minor("2.14.1+cu130") == "2.14" and torch_versions.torch_minor("2.13.0") == "2.13"


def test_another_torch_warns_once_and_is_treated_as_the_newest(monkeypatch):
    monkeypatch.setattr(torch_versions, "_current", [])
    monkeypatch.setattr(torch, "__version__", "2.99.0")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        row = torch_versions.current()
        assert torch_versions.current() is row
    assert row.torch == "2.14"
    assert len(caught) == 1 and "torch 2.99.0 is not a version the release ships for (PyTorch 2.13 and 2.14)" \
        in str(caught[0].message)


def test_build_files_and_readme_name_the_tested_versions():
    default = re.search(r'"torch==([\d.]+)"', (ROOT / "Makefile").read_text()).group(1)
    assert default == torch_versions.RELEASES[torch_versions.DEFAULT].tested
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert pyproject.count('"torch>=2.13,<2.15"') == 2  # build requirement and dependency
    readme = (ROOT / "README.md").read_text()
    for row in torch_versions.RELEASES.values():
        assert f"torch {row.tested}" in readme, f"README does not say torch {row.tested} is tested"
    assert "make test TORCH=2.14.1" in readme
