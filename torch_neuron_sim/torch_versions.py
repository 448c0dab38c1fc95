"""The PyTorch versions the emulated release ships for, and what the emulator
chooses by the running torch's version: this module is the one place that
reads torch.__version__ to decide anything.

The release pairs torch-neuronx 2.13.3 with PyTorch 2.13 and torch-neuronx
2.14.3 with PyTorch 2.14. Both families run the same public-beta native-op
table here (no separate table is published for the 2.13 family). The suite
runs against each `tested` version: the default venv has 2.13, `make test
TORCH=2.14.1` the other (README, "Torch versions")."""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass(frozen=True)
class TorchRelease:
    torch: str          # PyTorch major.minor
    torch_neuronx: str  # the release's torch-neuronx for it
    native_ops: str     # the native-op table (execution/native_ops/<name>.txt)
    tested: str         # the torch version the test suite runs against
    # PyTorch's group_norm hands native_group_norm a contiguous copy of a non-contiguous input
    # (2.13) or the input as it is (2.14). The device registers no native_group_norm, so
    # PyTorch's composite math_group_norm runs, and its view() rejects what is not contiguous:
    # from 2.14 on, group_norm on a transposed input raises on neuron (docs/testing.md).
    group_norm_copies_input: bool = True
    # scaled_dot_product_attention on 3-D (batch-less) q/k/v: PyTorch runs the math path on
    # them as they are (2.13), or adds a batch dimension of 1 before choosing a backend (2.14),
    # so they reach the device's fused attention op as 4-D inputs and run natively.
    sdpa_batches_3d_inputs: bool = False
    # How torch refuses monitored_barrier on a group without a gloo (CPU) backend, before the
    # device's backend is reached: its words changed in 2.14.
    monitored_barrier_refusal: str = "monitored_barrier is only implemented for GLOO"


RELEASES = {
    "2.13": TorchRelease("2.13", "2.13.3.0", "torchneuron-2.14-beta", "2.13.0"),
    "2.14": TorchRelease("2.14", "2.14.3.0", "torchneuron-2.14-beta", "2.14.1", group_norm_copies_input=False,
                         sdpa_batches_3d_inputs=True,
                         monitored_barrier_refusal="monitored_barrier requires a group with a CPU-capable backend"),
}
# The family the default venv installs (`make setup`); `make bench` measures with it.
DEFAULT = "2.13"


def torch_minor(version: Optional[str] = None) -> str:
    """'2.14' for '2.14.1+cu130' (the running torch's when version is None)."""
    return ".".join((version or torch.__version__).split("+")[0].split(".")[:2])


_current: list = []


def current() -> TorchRelease:
    """The release row of the running torch. Another torch warns once, naming the supported
    ones, and is treated as the newest."""
    if not _current:
        row = RELEASES.get(torch_minor())
        if row is None:
            row = RELEASES[max(RELEASES, key=lambda v: tuple(map(int, v.split("."))))]
            warnings.warn(f"torch_neuron_sim: torch {torch.__version__} is not a version the release ships for "
                          f"(PyTorch {' and '.join(RELEASES)}); treating it as {row.torch}", stacklevel=2)
        _current.append(row)
    return _current[0]
