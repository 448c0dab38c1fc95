"""How the report's text and page write sizes and source lines."""
from __future__ import annotations

import os


def short_site(site: str) -> str:
    """A source line relative to the working directory, where it lies below it."""
    cwd = os.getcwd() + os.sep
    return site[len(cwd):] if site.startswith(cwd) else site


def size(n: float, decimals: int = 1) -> str:
    """Bytes in the largest binary unit that keeps the number at least 1."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.{decimals}f} {unit}"
    return f"{int(n)} B"


def gib(n: int) -> str:
    """A device's memory: GiB from 1 MiB up, else KiB."""
    return f"{n / 2**30:.3f} GiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"
