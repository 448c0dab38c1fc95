"""Making `import nki` (and the legacy `from neuronxcc import nki`) resolve
to the simulator, so kernels written for Trainium import unchanged. Opt-in
(install_nki_alias(), also done by install_torch_neuronx_alias()), and never
over a real installation: a name that imports from the environment is left
alone."""
from __future__ import annotations

import importlib.util
import sys
import types


def _installed(name: str) -> bool:
    if name in sys.modules:
        return not getattr(sys.modules[name], "__nki_simulator__", False)
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    # A bare directory of that name on sys.path (a test folder `nki/`, a checkout's `nki/` of
    # kernels) is a namespace package, not an installation: it has no code to shadow.
    return spec is not None and spec.origin is not None


def install_nki_alias() -> list:
    """Registers `nki`, `nki.language`, `nki.isa`, `nki.typing` and the legacy
    `neuronxcc.nki[.language|.isa|.typing]` in sys.modules, each unless a real
    package of that name is importable. Returns the top-level names aliased."""
    from . import isa, language, typing as nki_typing
    package = sys.modules[__package__]  # torch_neuron_sim.nki, already imported (this module is part of it)
    done = []
    if not _installed("nki"):
        sys.modules["nki"] = package
        sys.modules["nki.language"] = language
        sys.modules["nki.isa"] = isa
        sys.modules["nki.typing"] = nki_typing
        done.append("nki")
    if not _installed("neuronxcc"):
        top = types.ModuleType("neuronxcc", "The simulator's stand-in for neuronxcc: only its nki package.")
        top.__nki_simulator__ = True
        top.nki = package
        sys.modules["neuronxcc"] = top
        sys.modules["neuronxcc.nki"] = package
        sys.modules["neuronxcc.nki.language"] = language
        sys.modules["neuronxcc.nki.isa"] = isa
        sys.modules["neuronxcc.nki.typing"] = nki_typing
        done.append("neuronxcc")
    return done
