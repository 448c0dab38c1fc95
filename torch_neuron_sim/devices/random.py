"""Random number generation on neuron: one default generator per device with
torch_neuronx's 16-byte state (uint64 seed, int64 offset). torch.manual_seed
seeds neuron too (PyTorch calls torch.neuron.manual_seed_all).

Where random tensors come from (docs/random.md): as on TorchNeuron, no random
op runs natively, so the CPU fallback draws them from the CPU default
generator - `torch.manual_seed(0); torch.randn(4, device="neuron")` equals the
CPU's `torch.randn(4)` - and the device generators' state is only kept.
NEURON_SIM_RNG=device (or set_rng_source("device")) models a future release
with native random ops: each device then draws from its own generator, a
stream independent of the CPU's."""
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
    data = new_state.detach().to("cpu", torch.uint8).contiguous().numpy().tobytes()
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


def host_generator(device: _DeviceLike = None) -> torch.Generator:
    """A CPU generator that draws a device's next random numbers: seeded from
    the device generator's (seed, offset), whose offset advances as for one
    native random op. Compiled graphs' random ops draw through it."""
    return _C._host_generator(_checked(device))


def set_rng_source(source: str) -> None:
    """'cpu' (default, as TorchNeuron): random ops on neuron draw from the CPU
    default generator. 'device': from the device's own generator."""
    if source not in ("cpu", "device"):
        raise ValueError(f"rng source {source!r}: use 'cpu' (default, as TorchNeuron) or 'device'")
    _C._set_device_rng_stream(source == "device")


def rng_source() -> str:
    return "device" if _C._device_rng_stream() else "cpu"


def _install() -> None:
    value = environment.setting(RNG_ENV, "cpu").lower()
    if value not in ("cpu", "device"):
        raise ValueError(f"{RNG_ENV}={value!r}: use 'cpu' (default, as TorchNeuron) or 'device'")
    set_rng_source(value)
