"""`torch_neuronx`, `nki` and `neuronxcc` findable from the moment torch
autoloads the emulator, as training stacks look for them.

accelerate and transformers decide whether the neuron device exists with
`importlib.util.find_spec("torch_neuronx")`; nothing imports it first. So
importing the emulator (which `import torch` does through the backend
autoload) puts a meta-path finder at the front of `sys.meta_path` that answers
for those names: `find_spec` returns a spec without importing anything, and
`import torch_neuronx` then places the emulator's module under the name (the
module object itself, not a copy, so its classes and state are the emulator's).

A real package of the same name always wins: the finder first asks the
finders behind it, and answers only when none of them finds the name (the
first such refusal is logged once). NEURON_SIM_TORCH_NEURONX_ALIAS=0 keeps
the finder out; `import torch_neuronx` is then a plain ModuleNotFoundError.
A meta-path finder rather than a `.pth` file: it is installed by the import
that registers the device, so the alias and the device come and go together
(`TORCH_DEVICE_BACKEND_AUTOLOAD=0` leaves both out), and it needs no file
outside the package.

The same finder puts trainer_rng.py's extension on transformers' Trainer (its
checkpoints keep the neuron generators' states): after loading
transformers.trainer with its own loader, or, when transformers.trainer was
imported first (its `import torch` installed the finder), at the finder's
installation or the next look for torch_neuronx, which transformers makes before
it picks the device.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import logging
import sys
from typing import Any, Callable, Optional

from ..environment import flag
from . import trainer_rng

ALIAS_ENV = "NEURON_SIM_TORCH_NEURONX_ALIAS"
_PACKAGE = __name__.rsplit(".", 2)[0]  # torch_neuron_sim
# The names answered, and the emulator's module each top-level name resolves to.
_TARGETS = {"torch_neuronx": f"{_PACKAGE}.torch_neuronx", "nki": f"{_PACKAGE}.nki",
            "neuronxcc": None}  # neuronxcc: the stand-in holding only its nki package
_log = logging.getLogger("torch_neuron_sim")
_refused: set = set()


def enabled() -> bool:
    """Whether the automatic alias is on (NEURON_SIM_TORCH_NEURONX_ALIAS unset, or a true switch)."""
    return flag(ALIAS_ENV, True)


def _ours(module: Any) -> bool:
    name = getattr(module, "__name__", "")
    return name == _PACKAGE or name.startswith(_PACKAGE + ".") or getattr(module, "__nki_simulator__", False)


def placeholder(module: Any) -> bool:
    """Whether `module` is the stand-in the import system holds while this finder's loader runs."""
    return getattr(getattr(getattr(module, "__spec__", None), "loader", None), "emulator_alias", False)


class _AliasLoader(importlib.abc.Loader):
    """Puts the emulator's module under the alias name: the import system
    returns whatever sys.modules holds for the name once exec_module is done."""

    emulator_alias = True  # lets other code tell this loader's specs from a real package's

    def __init__(self, target: Any) -> None:
        self._target = target  # a callable returning the module

    def create_module(self, spec: Any) -> None:
        return None  # a placeholder module; exec_module replaces it

    def exec_module(self, module: Any) -> None:
        sys.modules[module.__name__] = self._target()


def real_spec(name: str, path: Any = None) -> Any:
    """What the finders behind this one find for the name: a real installation's spec, or None."""
    for finder in sys.meta_path:
        if isinstance(finder, AliasFinder) or not hasattr(finder, "find_spec"):
            continue
        try:
            spec = finder.find_spec(name, path)
        except (ImportError, ValueError):
            continue
        if spec is not None and not getattr(spec.loader, "emulator_alias", False):
            return spec
    return None


class _ThenPatch(importlib.abc.Loader):
    """A module's own loader, then `trainer_rng.patch` on the executed module; everything
    else (get_source, get_code, is_package, ...) is the wrapped loader's."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        trainer_rng.patch(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class AliasFinder(importlib.abc.MetaPathFinder):
    """The meta-path finder for torch_neuronx, nki and neuronxcc (module docstring).
    `top_level(name)` registers the emulator's modules for a top-level name
    and returns the one that name becomes (torch_neuronx/__init__.py gives it)."""

    def __init__(self, top_level: Callable[[str], Any]) -> None:
        self._top_level = top_level

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        top = name.partition(".")[0]
        if top not in _TARGETS:  # every other import: one dict lookup, and one compare
            return self._trainer_spec(path) if name == trainer_rng.MODULE else None
        if name == top:
            if name == "torch_neuronx":
                trainer_rng.patch_loaded()  # transformers looks for it before it picks the device
            if real_spec(name, path) is not None:
                if name not in _refused:
                    _refused.add(name)
                    _log.info("%s: a real package is installed; the emulator's alias stays out of its way", name)
                return None
            return importlib.util.spec_from_loader(name, _AliasLoader(lambda: self._top_level(name)),
                                                   origin=self._origin(top), is_package=True)
        if not _ours(sys.modules.get(top)):
            return None  # a submodule of a real package: the path finders' business
        # A submodule the top-level alias did not register: the emulator's module of that name, never a
        # second copy of its file (the path finder would load one under the alias name).
        base = _TARGETS[top] if top != "neuronxcc" else None
        rest = name[len(top) + 1:]
        if top == "neuronxcc":
            if not (rest == "nki" or rest.startswith("nki.")):
                return None
            base, rest = _TARGETS["nki"], rest[len("nki"):].lstrip(".")
        target_name = f"{base}.{rest}" if rest else base
        try:
            found = importlib.util.find_spec(target_name)
        except (ImportError, ValueError):
            return None
        if found is None:
            return None
        return importlib.util.spec_from_loader(name, _AliasLoader(lambda: importlib.import_module(target_name)),
                                               origin=found.origin, is_package=found.submodule_search_locations is not None)

    @staticmethod
    def _trainer_spec(path: Any) -> Any:
        # transformers.trainer as the finders behind this one find it, loaded by its own loader and then
        # given the neuron RNG states in its checkpoints (torch_neuronx/trainer_rng.py).
        spec = real_spec(trainer_rng.MODULE, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _ThenPatch(spec.loader)
        return spec

    @staticmethod
    def _origin(top: str) -> Optional[str]:
        # The emulator's file for the name, found without importing it (its parent package is imported).
        found = importlib.util.find_spec(_TARGETS[top] or _TARGETS["nki"])
        return found.origin if found is not None else None


def install_finder(top_level: Callable[[str], Any]) -> None:
    """Put the finder first on sys.meta_path (once)."""
    if not any(isinstance(f, AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, AliasFinder(top_level))
    trainer_rng.patch_loaded()
