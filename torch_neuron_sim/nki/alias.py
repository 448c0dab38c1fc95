"""Making `import nki` (and the legacy `from neuronxcc import nki`) resolve
to the simulator, so kernels written for Trainium import unchanged:
install_nki_alias(), done by install_torch_neuronx_alias() and by the first
`import nki` / `import neuronxcc` through the emulator's alias finder
(torch_neuronx/alias.py). Never over a real installation: a name that
imports from the environment is left alone."""
from __future__ import annotations

import sys
import types
from typing import Any


def _alias_spec(spec: Any) -> bool:
    # A spec of torch_neuronx/alias.py's finder, which answers for these names with the simulator itself.
    return getattr(getattr(spec, "loader", None), "emulator_alias", False)


def _installed(name: str) -> bool:
    module = sys.modules.get(name)
    if module is not None and not _alias_spec(getattr(module, "__spec__", None)):
        return not getattr(module, "__nki_simulator__", False)
    for finder in sys.meta_path:
        if not hasattr(finder, "find_spec"):
            continue
        try:
            spec = finder.find_spec(name, None)
        except (ImportError, ValueError):
            continue
        # A bare directory of that name on sys.path (a namespace package, origin None) is no installation.
        if spec is not None and spec.origin is not None and not _alias_spec(spec):
            return True
    return False


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
