"""Adaptive eager (experimental; TorchNeuron's "concatenation" engine): with
``TORCH_NEURONX_ENABLE_CONCATENATION=1`` the device queues eager ops and
compiles each run of consecutive device ops between two flush points into one
NEFF, launched once - fewer launches and fewer eager compilations, with the
op order and numerics of plain eager. Off by default, and never in
deterministic mode (``torch.use_deterministic_algorithms(True)``).

The emulator still runs every op at once, so results are bit-identical to
plain eager; what changes is what the device would do, modelled in C++
(``csrc/runtime/adaptive_eager.h``, fed by the op path): launches and
compilations per fused run, in the profiler's device timeline, ``estimate()``,
the migration report and ``torch_neuronx.metrics``. Op tracking stays per op.
The fusion rule, its limits and the flush points: docs/semantics.md,
"Adaptive eager".

    from torch_neuron_sim import adaptive_eager as ae
    with ae.mode(True):
        loss = model(x).sum(); loss.backward(); opt.step()
    ae.stats()   # {'ops': ..., 'launches': ..., 'fused_launches': ..., 'compilations': ..., 'flushes': {...}}
"""
from __future__ import annotations

import contextlib
from typing import Iterator

from .. import _C
from .. import environment



def enable(on: bool = True) -> None:
    """Switch adaptive eager on or off (off closes the open runs first)."""
    _C._set_adaptive_eager(bool(on))


def enabled() -> bool:
    return _C._adaptive_eager_enabled()


@contextlib.contextmanager
def mode(on: bool = True) -> Iterator[None]:
    """Adaptive eager on (or off) inside the block; the previous setting after
    it. Leaving the block flushes, so each block's runs are its own."""
    before = enabled()
    enable(on)
    try:
        yield
    finally:
        flush()
        enable(before)


def flush() -> None:
    """Close every device's open run now (it compiles, if new, and launches)."""
    _C._adaptive_eager_flush(False)


def flush_for_kernel_call() -> None:
    """A kernel with its own NEFF (an NKI kernel) is about to run: a flush point."""
    _C._adaptive_eager_flush(True)


def set_max_ops(n: int) -> None:
    """The longest fused launch, in ops (default 1024): a run that reaches it
    is closed and the next op opens a new one."""
    # Any size beyond what a run can hold means "no limit": C++ caps it, Python
    # only keeps an int too large for the binding from reaching it.
    _C._set_adaptive_eager_max_ops(min(int(n), 2**32 - 1))


def max_ops() -> int:
    return _C._adaptive_eager_max_ops()


def stats() -> dict:
    """Counts since start (or :func:`clear_stats`): ``ops`` that joined runs,
    ``launches`` (closed runs), ``fused_launches`` (runs of 2 or more ops) and
    their ``fused_ops``, fused-run ``compilations`` and ``cache_hits``, and
    ``flushes`` per reason (``host_read``, ``host_write``, ``synchronize``,
    ``fallback``, ``kernel_call``, ``collective``, ``graph``, ``limit``,
    ``deterministic``, ``explicit``)."""
    return _C._adaptive_eager_stats()


def clear_stats() -> None:
    _C._clear_adaptive_eager_stats()


def _install() -> None:
    max_env = environment.setting("NEURON_SIM_ADAPTIVE_EAGER_MAX_OPS")
    if max_env:
        try:
            set_max_ops(int(max_env))
        except ValueError:
            import warnings
            warnings.warn(f"NEURON_SIM_ADAPTIVE_EAGER_MAX_OPS={max_env!r} ignored: expected an integer >= 1 (ops "
                          f"per fused launch); keeping {max_ops()}", stacklevel=2)
    enable(environment.flag("TORCH_NEURONX_ENABLE_CONCATENATION"))
