"""A real torch-neuronx installed beside the emulator: one backend owns `neuron`.

Both packages register the device over PrivateUse1 when torch autoloads them.
Two backends over one dispatch key would fight (each one's kernels replacing
the other's), so the emulator checks before it loads its kernels: when the
real backend already registered `neuron`, the emulator refuses with one
message naming both; when the emulator registers first, it says the same
once in its log. Either way `import torch_neuronx` is the real package (the
alias finder defers to it). Light on purpose: it runs before the extension loads.
"""
from __future__ import annotations

import importlib.metadata
import logging
from typing import Any, Optional

REAL_DISTRIBUTION = "torch-neuronx"


def real_distribution() -> Optional[Any]:
    """The installed torch-neuronx distribution (importlib.metadata), or None."""
    try:
        return importlib.metadata.distribution(REAL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def message(dist: Any, registered_by: str) -> str:
    """The one message for a real torch-neuronx installed beside the emulator."""
    return (f"torch-neuronx {dist.version} (the real Trainium backend) and torch-neuron-sim (the emulator) are "
            f"both installed; the 'neuron' device (PrivateUse1) is registered by {registered_by}, and only one "
            f"backend may own it. `import torch_neuronx` is the real package. Uninstall one of the two "
            f"(pip uninstall torch-neuronx, or pip uninstall torch-neuron-sim).")


def check(backend_name: str) -> None:
    """Before the emulator registers: refuse if the real backend already owns
    PrivateUse1 as `neuron`; log once if it is installed but has not registered."""
    dist = real_distribution()
    if dist is None:
        return
    if backend_name == "neuron":
        raise ImportError(message(dist, f"torch-neuronx {dist.version}") + " The emulator did not register.")
    logging.getLogger("torch_neuron_sim").warning("%s", message(dist, "torch-neuron-sim (the emulator)"))
