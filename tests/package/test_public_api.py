"""The package's public names are one table (docs/architecture.md, "Public names"):
`torch_neuron_sim.__all__` is exactly that table, every name resolves, and no public
name hides a room of the package (`torch_neuron_sim.report` is the function, the
room is `migration_report/`)."""
import importlib
import re
from pathlib import Path

import torch

import torch_neuron_sim

ROOT = Path(__file__).resolve().parents[2]


def documented_names() -> list[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("### Public names", 1)[1].split("\n### ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return [name for row in rows for name in re.findall(r"`(\w+)`", row)]


def test_all_is_the_documented_table():
    documented = documented_names()
    assert len(documented) == len(set(documented)), "a name listed twice"
    assert sorted(torch_neuron_sim.__all__) == sorted(documented)


def test_every_public_name_resolves():
    missing = [n for n in torch_neuron_sim.__all__ if not hasattr(torch_neuron_sim, n)]
    assert not missing


def test_no_public_name_hides_a_room():
    pkg = ROOT / "torch_neuron_sim"
    rooms = sorted(p.parent.name for p in pkg.glob("*/__init__.py"))
    for room in rooms:
        module = importlib.import_module(f"torch_neuron_sim.{room}")
        assert getattr(torch_neuron_sim, room) is module, f"torch_neuron_sim.{room} is not the room {room}/"
    for name in torch_neuron_sim.__all__:
        assert not (pkg / name).is_dir() or getattr(torch_neuron_sim, name).__name__ == f"torch_neuron_sim.{name}"


def test_package_attributes_users_reach():
    t = torch_neuron_sim
    assert torch.neuron is t.neuron and torch.neuron.memory is t.memory
    assert t.streams.launch_blocking() in (True, False)
    assert callable(t.stream_check.check_stream_order) and callable(t.random.set_rng_source)
    assert callable(t.device) and callable(t.report) and callable(t.estimate)
    assert t.estimate.__module__ == "torch_neuron_sim.profiler.estimate"
    from torch_neuron_sim.migration_report import Report, report
    assert report is t.report and Report.__module__ == "torch_neuron_sim.migration_report.report"
    import torch_neuron_sim.profiler.estimate as estimate_module  # a module path gives the module
    assert estimate_module.estimate is t.estimate
