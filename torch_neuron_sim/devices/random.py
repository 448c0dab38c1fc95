"""Random number generation on neuron: one default generator per device with
torch_neuronx's 16-byte state (uint64 seed, int64 offset). torch.manual_seed
seeds neuron too (PyTorch calls torch.neuron.manual_seed_all).

Where random numbers come from (docs/random.md), as in the release: random
ops that run on the device (native_dropout, fused attention's dropout, random
ops inside compiled graphs) draw from the device's generator, whose offset
advances by the numbers each op consumes; random ops that fall back run on the
CPU and draw from the CPU default generator. NEURON_SIM_RNG=cpu (or
set_rng_source("cpu")) makes every random op draw from the CPU stream (dropout
equal to CPU dropout); NEURON_SIM_RNG=all makes the fallback's random ops draw
from the device's generator too, modelling a release where all are native."""
from __future__ import annotations

from typing import Iterable

import torch

from .. import _C
from .. import environment
from .device import _checked, _DeviceLike, device_count


def manual_seed(seed: int) -> None:
    """Seed the current device's generator."""
    _C._rng_manual_seed(_checked(None), int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def manual_seed_all(seed: int) -> None:
    for i in range(device_count()):
        _C._rng_manual_seed(i, int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def seed() -> None:
    """Seed the current device's generator with a non-deterministic number."""
    _C._rng_seed(_checked(None))


def seed_all() -> None:
    s = _C._rng_seed(0)
    manual_seed_all(s)


def initial_seed() -> int:
    return _C._rng_initial_seed(_checked(None))


def get_rng_state(device: _DeviceLike = None) -> torch.Tensor:
    """The 16-byte state (seed, offset) of a device's generator, as a uint8 CPU tensor."""
    return torch.frombuffer(bytearray(_C._rng_get_state(_checked(device))), dtype=torch.uint8)


def set_rng_state(new_state: torch.Tensor, device: _DeviceLike = None) -> None:
    """Restore a state from get_rng_state (16 bytes; 8 bytes sets the seed only)."""
    if not isinstance(new_state, torch.Tensor) or new_state.dtype != torch.uint8:
        got = new_state.dtype if isinstance(new_state, torch.Tensor) else type(new_state).__name__
        raise TypeError(f"RNG state must be a torch.ByteTensor (uint8), got {got}")
    data = new_state.detach().cpu().contiguous().numpy().tobytes()
    _C._rng_set_state(_checked(device), data)


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


RNG_ENV = "NEURON_SIM_RNG"


def default_generator(device: int = 0) -> torch.Generator:
    """The default generator of neuron device `device` (torch_neuronx's `_C._get_default_generator`)."""
    return _C._get_default_generator(device)


def host_generator(device: _DeviceLike = None, numbers: int = 4) -> torch.Generator:
    """A CPU generator that draws a device's next random numbers: seeded from
    the device generator's (seed, offset), whose offset advances past the
    `numbers` the caller will draw (in whole Philox blocks of 4), as for one
    native random op. Compiled graphs' random ops draw through it."""
    return _C._host_generator(_checked(device), max(int(numbers), 1))


_SOURCES = ("cpu", "device", "all")


def set_rng_source(source: str) -> None:
    """'device' (default, as the release): random ops that run on the device
    draw from its generator, the fallback's from the CPU generator. 'cpu':
    every random op draws from the CPU default generator. 'all': every random
    op on neuron draws from the device's generator."""
    if source not in _SOURCES:
        raise ValueError(f"rng source {source!r}: use 'device' (default, as the release), 'cpu' or 'all'")
    _C._set_rng_source(_SOURCES.index(source))


def rng_source() -> str:
    return _SOURCES[_C._rng_source()]


def _install() -> None:
    value = environment.setting(RNG_ENV, "device").lower()
    if value not in _SOURCES:
        raise ValueError(f"{RNG_ENV}={value!r}: use 'device' (default, as the release), 'cpu' or 'all'")
    set_rng_source(value)
