"""Where did an op run? Assertions over the op tracker that match names the
way torch_neuronx's own test helpers do: a name that fell back exactly fails;
an exact executed name passes; otherwise a name passes if an executed entry
contains "nki_<name>", the name with "aten::" replaced by "nki_", or the name
without "aten::" (so "aten::div" passes through "aten::div.out").
Falling back needs the exact recorded name ("aten::cumprod", "aten::min.dim").
The names recorded are the device's (torch_neuron_sim.tracking)."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from ..devices.device import synchronize
from ..execution.tracking import (
    clear_op_tracking, get_executed_ops, get_fallback_ops, get_op_counts, host_device_copies,
)


def _ran(name: str, executed: list[str]) -> bool:
    if name in executed:
        return True
    variants = (f"nki_{name}", name.replace("aten::", "nki_"), name.replace("aten::", ""))
    return any(v in e for e in executed for v in variants)


class OpTracker:
    """What ran where since the tracker was made (it clears the tracker)."""

    @property
    def executed(self) -> list[str]:
        """Ops that ran on neuron, as the device records them ("aten::add.Tensor")."""
        synchronize()
        return get_executed_ops()

    @property
    def fallback(self) -> list[str]:
        """Ops that fell back to CPU, with overload ("aten::min.dim")."""
        synchronize()
        return get_fallback_ops()

    @property
    def counts(self) -> dict[str, dict[str, int]]:
        synchronize()
        return get_op_counts()

    def __enter__(self) -> "OpTracker":
        return self

    def __exit__(self, *exc) -> None:
        return None


def track_neuron_ops() -> OpTracker:
    """Clears op tracking and returns a tracker (usable as a context manager)."""
    synchronize()
    clear_op_tracking()
    return OpTracker()


def check_op_runs_on_neuron(name: str) -> bool:
    """True if `name` ran on neuron and did not fall back (exact name) since the last clear."""
    synchronize()
    if name in get_fallback_ops():
        return False
    return _ran(name, get_executed_ops())


def _state(name: str) -> str:
    return (f"executed on neuron: {get_executed_ops()}\nfell back to CPU: {get_fallback_ops()}")


def assert_op_runs_on_neuron(name: str) -> None:
    """The op ran natively on neuron, and did not fall back."""
    if not check_op_runs_on_neuron(name):
        raise AssertionError(f"expected {name} to run on neuron\n{_state(name)}")


def assert_op_did_not_run_on_neuron(name: str) -> None:
    """The op did not run natively on neuron (it fell back, or did not run)."""
    if check_op_runs_on_neuron(name):
        raise AssertionError(f"expected {name} not to run on neuron, but it did\n{_state(name)}")


def assert_op_falls_back_on_cpu(name: str) -> None:
    """The op took the CPU fallback at least once."""
    synchronize()
    if name not in get_fallback_ops():
        raise AssertionError(f"expected {name} to fall back to CPU (exact name, e.g. 'aten::min.dim')\n{_state(name)}")


def assert_op_does_not_run(name: str) -> None:
    """The op neither ran on neuron nor fell back."""
    synchronize()
    fell = name in get_fallback_ops() or _ran(name, get_fallback_ops())
    if _ran(name, get_executed_ops()) or fell:
        raise AssertionError(f"expected {name} not to run at all, but it did\n{_state(name)}")


def count_cpu_bounce_calls(fn, *args, **kwargs) -> int:
    """How many host<->device copies running ``fn(*args, **kwargs)`` made (0 when
    every op it ran was native), as torch_neuronx's test helper counts them."""
    synchronize()
    before = host_device_copies()
    fn(*args, **kwargs)
    synchronize()
    return host_device_copies() - before


def get_executed_op_list() -> list[str]:
    synchronize()
    return get_executed_ops()


def _fallback_counts() -> dict[str, int]:
    return {n: c["fallback"] for n, c in get_op_counts().items() if c["fallback"]}


def fallbacks_since(before: dict[str, int]) -> dict[str, int]:
    """Fallback calls per op since the snapshot `before` (from fallback_snapshot()).
    A counter that went down was cleared in between: its new value counts."""
    after = _fallback_counts()
    out = {}
    for n, c in after.items():
        d = c - before.get(n, 0) if c >= before.get(n, 0) else c
        if d > 0:
            out[n] = d
    return out


def fallback_snapshot() -> dict[str, int]:
    synchronize()
    return _fallback_counts()


class FallbackError(AssertionError):
    """Ops fell back to CPU where none may."""


@contextmanager
def assert_no_fallback() -> Iterator[None]:
    """Fails (FallbackError) if any op falls back to CPU inside the block. The
    tracker is not cleared, so it composes with track_neuron_ops()."""
    before = fallback_snapshot()
    yield
    synchronize()
    fell = fallbacks_since(before)
    if fell:
        listed = ", ".join(f"{n} (x{c})" for n, c in sorted(fell.items()))
        raise FallbackError(f"ops fell back to CPU inside assert_no_fallback(): {listed}")
