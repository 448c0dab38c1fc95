"""Autograd's device threads at interpreter exit.

A device thread can still hold a finished backward when the program's last
line returns; freeing it then needs the GIL while Python finalizes, and the
process aborts ("terminate called without an active exception"). An atexit
handler, which runs before finalization, makes each neuron device thread
finish that turn first (csrc/aten/device/autograd_exit.cpp says why and how).
"""
from __future__ import annotations

import atexit

from .. import _C

# A device thread still busy with another thread's backward after this long
# is left alone: the process must be able to exit.
_TIMEOUT_MS = 2000


def _drain() -> None:
    _C._drain_autograd_device_threads(_TIMEOUT_MS)


def _install() -> None:
    atexit.register(_drain)
