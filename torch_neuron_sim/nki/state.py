"""The kernel launch this thread is running, if any (a launch.Launch): what the
language's functions, the ISA and error messages read."""
from __future__ import annotations

import threading
from typing import Any, Optional

_tls = threading.local()


def current_or_none() -> Optional[Any]:
    return getattr(_tls, "launch", None)


def set_current(launch: Optional[Any]) -> None:
    _tls.launch = launch
