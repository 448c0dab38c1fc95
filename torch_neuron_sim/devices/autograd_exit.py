"""Autograd's device threads at interpreter exit.

A device thread can still hold a finished backward when the program's last
line returns; freeing it then needs the GIL while Python finalizes, and the
process aborts ("terminate called without an active exception"). An atexit
handler, which runs before finalization, makes each neuron device thread
finish that turn first (csrc/aten/device/autograd_exit.cpp says why and how).
"""
from __future__ import annotations

import atexit

from .. import _C, environment

# A device thread still busy with another thread's backward after this long
# is left alone: the process must be able to exit. NEURON_SIM_EXIT_DRAIN_MS
# sets it for a process that runs far slower than a normal build (under
# ThreadSanitizer the first drain alone takes most of a second).
DEFAULT_TIMEOUT_MS = 2000
_MAX_TIMEOUT_MS = 2**31 - 1  # the binding's int
_timeout_ms = DEFAULT_TIMEOUT_MS


def timeout_ms() -> int:
    """How long the drain at exit waits for the device threads, in ms."""
    return _timeout_ms


def _drain() -> None:
    _C._drain_autograd_device_threads(_timeout_ms)


def _install() -> None:
    global _timeout_ms
    _timeout_ms = int(environment.milliseconds("NEURON_SIM_EXIT_DRAIN_MS", DEFAULT_TIMEOUT_MS, _MAX_TIMEOUT_MS))
    atexit.unregister(_drain)  # installed again (a test re-reads the variable): still one drain
    atexit.register(_drain)
