"""The case registry the parity suites share: each suite lists Cases (an id
and a check drawing its inputs from hypothesis), runs them under the active
hypothesis profile, and test_coverage.py runs every case once to count the
ATen ops the suites exercise."""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial
from typing import Callable, Sequence

import torch
from hypothesis import settings, strategies as st

from torch_neuron_sim.testing import assert_parity
from torch_neuron_sim.testing import strategies as nst

F32 = torch.float32
BF16 = torch.bfloat16
F16 = torch.float16
F32_BF16 = (F32, BF16)
# float16 where the real backend runs it natively (fp16 is one of its compute
# types; autocast supports it).
F32_BF16_F16 = (F32, BF16, F16)
INTS = (torch.int32, torch.int64, torch.uint8)


@dataclass
class Case:
    id: str
    check: Callable[[st.DataObject], None]

    def __call__(self, data) -> None:
        global _data
        _data = data
        try:
            self.check(data)
        finally:
            _data = None

    def __str__(self) -> str:
        return self.id


def short(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def cases(name: str, dtypes: Sequence[torch.dtype], check: Callable) -> list[Case]:
    """One Case per dtype: check(dtype, data)."""
    return [Case(f"{name}-{short(d)}", partial(check, d)) for d in dtypes]


_data = None  # the running case's hypothesis data, for the path draw


def parity(fn, *args, grad: bool = False, **kw):
    """assert_parity as the suites use it: an execution path drawn per
    example (path_of), and inputs that must be valid (a CPU error means the
    case tests nothing)."""
    kw.setdefault("path", path_of(_data) if _data is not None else "both")
    kw.setdefault("allow_errors", False)
    assert_parity(fn, *args, grad=grad, **kw)


def tensor(data, dtype, shape=None, **kw) -> torch.Tensor:
    return data.draw(nst.tensors(dtype=dtype, shape=shape, **kw))


def parity_settings(test):
    """Examples per case: 5 under the default profile (the suites have over
    a thousand cases, the better part of `make test`'s time, which must stay
    under 20 minutes; derandomized, so the same 5 every run), the profile's
    own count under `deep` (NEURON_SIM_HYPOTHESIS_PROFILE=deep, `make
    test-deep`, 500 random examples a case)."""
    if os.environ.get("NEURON_SIM_HYPOTHESIS_PROFILE", "default") == "default":
        return settings(max_examples=5)(test)
    return test


def path_of(data) -> str:
    """Each example runs one execution path: the table (as on the device),
    or with the paths swapped (every op on the fallback; the ops that fell
    back forced native), so every kernel is checked both ways."""
    return data.draw(st.sampled_from(["table", "table", "fallback", "native"]), label="path")
