"""Compilation artifacts, laid out as the release lays them out:
with TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1, each compiled graph
leaves under TORCH_NEURONX_DEBUG_DIR (default /tmp/neuron_backend)
  fx_graphs/proc_{rank}/{graph}_{timestamp}.txt  the FX graph, readable
  neff/proc_{rank}/{graph}_{timestamp}.py        the generated code that stands
                                                 for the NEFF (Inductor's module,
                                                 or the graph's code op by op)
The release's stablehlo/ and raw/ directories have no counterpart: nothing
is lowered to StableHLO here. Nothing is written by default."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from ..environment import flag, setting


def preserve() -> bool:
    return flag("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS")


def debug_dir() -> Path:
    return Path(setting("TORCH_NEURONX_DEBUG_DIR", "/tmp/neuron_backend"))


def _rank() -> int:
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(setting("RANK", "0"))


def write(name: str, gm: torch.fx.GraphModule, fn: Any) -> None:
    """Keeps one compiled graph's artifacts (when preserving is on)."""
    stamp = time.strftime("%Y%m%d_%H%M%S") + f"_{time.time_ns() % 1_000_000_000:09d}"
    proc = f"proc_{_rank()}"
    code = getattr(fn, "source_code", None) or gm.code
    for sub, suffix, text in (("fx_graphs", "txt", gm.print_readable(print_output=False)), ("neff", "py", code)):
        d = debug_dir() / sub / proc
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{name}_{stamp}.{suffix}").write_text(text)
