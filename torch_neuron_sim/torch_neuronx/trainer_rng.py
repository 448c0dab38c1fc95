"""transformers' Trainer checkpoints the neuron generators with the other RNG states.

A Trainer checkpoint keeps the random states (`rng_state.pth`, one file per process
when distributed) so that a resumed run draws what the uninterrupted run would have
drawn. transformers 5.23 saves Python's, NumPy's and the CPU generator's, then the
device generators of the backends it knows (CUDA, XLA, NPU, HPU, MLU, MUSA); a
`neuron` device is not among them. Dropout on neuron draws from the device's generator
(docs/random.md), so a run resumed on neuron replayed the masks of its first steps
instead of continuing the stream.

This adds the neuron states to the same file, under the key `neuron`, the way the
Trainer keeps the other devices': the current device's state
(`torch.neuron.get_rng_state()`), every device's (`torch.neuron.get_rng_state_all()`)
when training is distributed; resuming restores them with the matching setter right
after the Trainer restores the rest. A Trainer on the CPU (`use_cpu=True`) is left
as it is, and so is a transformers whose Trainer already saves a `neuron` state.

The alias finder (torch_neuronx/alias.py) puts this in place with no call from the
script: after it loads transformers.trainer (imported after torch), and when it is
installed or asked for torch_neuronx while transformers.trainer is already loaded
(imported first: importing it imports torch, which installs the finder).
"""
from __future__ import annotations

import functools
import logging
import os
import sys
from typing import Any

import torch

MODULE = "transformers.trainer"
KEY = "neuron"
_MARK = "__neuron_rng_state__"


def _rng_file(trainer: Any, directory: str) -> str:
    # The file the Trainer itself writes (its _save_rng_state / _load_rng_state).
    name = "rng_state.pth" if trainer.args.world_size <= 1 else f"rng_state_{trainer.args.process_index}.pth"
    return os.path.join(directory, name)


def _on_neuron(trainer: Any) -> bool:
    return trainer.args.device.type == "neuron"


def _distributed(trainer: Any) -> bool:
    from transformers.training_args import ParallelMode
    return trainer.args.parallel_mode == ParallelMode.DISTRIBUTED


def _load(path: str) -> dict:
    from transformers.trainer_pt_utils import safe_globals  # NumPy's state in the file, as the Trainer loads it
    with safe_globals():
        return torch.load(path, weights_only=True)


def _save_rng_state(original: Any, self: Any, output_dir: str) -> None:
    original(self, output_dir)
    if not _on_neuron(self):
        return
    path = _rng_file(self, output_dir)
    states = _load(path)
    if KEY in states:  # this Trainer saves neuron's state itself
        return
    states[KEY] = torch.neuron.get_rng_state_all() if _distributed(self) else torch.neuron.get_rng_state()
    torch.save(states, path)


def _load_rng_state(original: Any, self: Any, checkpoint: Any) -> None:
    original(self, checkpoint)
    if checkpoint is None or not _on_neuron(self):
        return
    path = _rng_file(self, checkpoint)
    if not os.path.isfile(path):
        return  # the Trainer has said so in its log
    state = _load(path).get(KEY)
    if state is None:
        logging.getLogger(MODULE).info("%s has no neuron RNG state (saved without it): dropout and other random "
                                       "ops on neuron will not continue the interrupted run's stream", path)
        return
    if _distributed(self):
        torch.neuron.set_rng_state_all(state)
    else:
        torch.neuron.set_rng_state(state)


def _wrapped(original: Any, extra: Any) -> Any:
    @functools.wraps(original)
    def method(self: Any, directory: Any) -> None:
        extra(original, self, directory)
    return method


def patch(module: Any) -> None:
    """Extend `module.Trainer` (transformers.trainer, fully imported) once."""
    trainer = getattr(module, "Trainer", None)
    if trainer is None or getattr(trainer, _MARK, False):
        return
    for name, extra in (("_save_rng_state", _save_rng_state), ("_load_rng_state", _load_rng_state)):
        original = getattr(trainer, name, None)
        if original is None:
            return  # a Trainer without these methods keeps its own ways
        setattr(trainer, name, _wrapped(original, extra))
    setattr(trainer, _MARK, True)


def patch_loaded() -> None:
    """Patch transformers.trainer if it is imported and done executing. One still executing (it
    imported torch, which installed the alias finder) is patched at the next look for
    torch_neuronx, which transformers makes before it picks the device."""
    module = sys.modules.get(MODULE)
    if module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False):
        patch(module)
