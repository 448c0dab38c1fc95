"""The on-chip books of an NKI launch: what a tile takes of SBUF (bytes per
partition) or PSUM (2 KiB banks), and charging it against the launch's
capacity when the tile is allocated (memory.Allocation returns the charge
when the tile dies). A tile over the partition limit or past the capacity
fails with the numbers and what to do. The partition dimension is dim 0, or
the one a legacy block tile marks with nl.par_dim."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .launch import fail

if TYPE_CHECKING:  # annotations only: a tile's dtype is a torch.dtype
    import torch


class ParDim(int):
    """nl.par_dim(n): a shape's partition dimension, placed behind leading block
    dimensions in the legacy dialect (`(blocks, nl.par_dim(128), free)`: each block is a
    128-partition tile, so a partition holds blocks x free elements)."""

    def __repr__(self) -> str:
        return f"par_dim({int(self)})"


def footprint_of(lim: Any, buffer: Any, shape: tuple, dtype: torch.dtype, name: str, partition: int = 0) -> tuple:
    """What an on-chip tile takes: ("sbuf", bytes per partition) or ("psum", banks); checks
    the partition limit. `partition`: the partition dimension (0 but for a legacy block
    tile, whose leading block dimensions lie along each partition like free ones)."""
    if shape[partition] > lim.pmax:
        where = f"dim {partition}, nl.par_dim" if partition else "dim 0"
        raise fail("nl.ndarray", f"partition dimension {shape[partition]} of '{name}' in {buffer!r} exceeds maximum "
                   f"{lim.pmax}", f"put at most 128 rows on the partition dimension ({where}) and tile the rest")
    per_partition = math.prod(shape) // shape[partition] * dtype.itemsize
    if buffer.name == "sbuf":
        return ("sbuf", per_partition)
    return ("psum", max(1, -(-per_partition // lim.psum_bank_bytes)))


def charge(launch: Any, buffer: Any, shape: tuple, dtype: torch.dtype, name: str,
            footprint: tuple) -> tuple:
    """Books `footprint` against the launch's capacity (raising when it does not fit)."""
    lim = launch.limits
    kind, amount = footprint
    if kind == "sbuf":
        per_partition = amount
        if launch.check_capacity and launch.sbuf_used + per_partition > lim.sbuf_bytes_per_partition:
            raise fail("nl.ndarray", f"SBUF capacity exceeded: '{name}' {tuple(shape)} {dtype} needs "
                       f"{per_partition} bytes per partition, {launch.sbuf_used} are in use, "
                       f"{lim.profile} has {lim.sbuf_bytes_per_partition} bytes per partition "
                       f"({lim.sbuf_bytes_per_partition * lim.pmax // (1024 * 1024)} MiB)",
                       "use smaller tiles or let tiles die (allocate inside the loop that uses them)")
        launch.sbuf_used += per_partition
        if launch.sbuf_used > launch.sbuf_peak:
            launch.sbuf_peak = launch.sbuf_used
        return footprint
    banks = amount
    if launch.check_capacity and launch.psum_banks_used + banks > lim.psum_banks:
        raise fail("nl.ndarray", f"PSUM capacity exceeded: '{name}' {tuple(shape)} {dtype} needs {banks} of the "
                   f"{lim.psum_banks} banks of {lim.psum_bank_bytes} bytes per partition, "
                   f"{launch.psum_banks_used} are in use",
                   "let PSUM tiles die (allocate them inside the loop) or copy results to SBUF and reuse the bank")
    launch.psum_banks_used += banks
    return footprint
