"""Injected out-of-memory errors, so code that handles them (batch-size
back-off, checkpoint-and-retry) can be tested without filling a device.

The environment variable NEURON_SIM_FAIL_ALLOC_AT=N makes the Nth device
allocation of the process fail; inject_oom(after=N) lets N more allocations
succeed and fails the next one. Allocations of 0 bytes are not counted. The
failure is the real one: torch.OutOfMemoryError with the allocator's message,
counted in memory_stats()["num_ooms"]. It fires once.
"""
from __future__ import annotations

from typing import Any

from .. import _C


class inject_oom:
    """Arm an injected OOM: `after` allocations succeed, the next one fails.

    Arms on construction, so a plain call works; as a context manager it also
    disarms on exit if the failure has not fired yet::

        with torch_neuron_sim.inject_oom(after=3):
            train_step()          # the 4th allocation raises torch.OutOfMemoryError
    """

    def __init__(self, after: int = 0):
        if not isinstance(after, int) or after < 0:
            raise ValueError(f"after must be a non-negative int, got {after!r}")
        self.after = after
        _C._arm_alloc_failure(after + 1)

    @property
    def pending(self) -> bool:
        """True while the failure is armed and has not fired."""
        return _C._allocations_until_failure() > 0

    def cancel(self) -> None:
        _C._arm_alloc_failure(0)

    def __enter__(self) -> "inject_oom":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.cancel()
        return False
