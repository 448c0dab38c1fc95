"""For tests written as a torch_neuronx user writes them: through the
`import torch_neuronx` alias, with the device's own names, messages and test
helpers. A test module imports the two fixtures with the names it uses:

    from torch_neuronx_user import D, torch_neuronx, copy_entry_points_restored, neuronx_alias  # noqa: F401

Such a module's tests hold the alias's modules in sys.modules only while they run; later
tests import torch_neuronx afresh (through the alias finder, torch_neuronx/alias.py)."""
import sys

import pytest

import torch_neuron_sim

torch_neuron_sim.install_torch_neuronx_alias()
import torch_neuronx  # noqa: E402  (the emulator, through the alias)

D = "neuron"
COPY_ENTRIES = ("_nrt_copy_cpu_to_neuron_tensor", "_nrt_copy_neuron_to_cpu_tensor")


def _remove_alias():
    for name in [n for n in sys.modules if n == "torch_neuronx" or n.startswith("torch_neuronx.")]:
        del sys.modules[name]


_remove_alias()


@pytest.fixture(scope="module", autouse=True)
def neuronx_alias():
    torch_neuron_sim.install_torch_neuronx_alias()
    yield
    _remove_alias()


@pytest.fixture(autouse=True)
def copy_entry_points_restored():
    # A test that replaces torch_neuronx._C's copy entry points must leave them as it found
    # them: while one is replaced, every host<->device copy of later tests goes through Python.
    yield
    left = [n for n in COPY_ENTRIES if n in vars(torch_neuron_sim.torch_neuronx._C)]
    assert not left, f"{left} left replaced on torch_neuronx._C"


__all__ = ["D", "COPY_ENTRIES", "torch_neuronx", "neuronx_alias", "copy_entry_points_restored"]
