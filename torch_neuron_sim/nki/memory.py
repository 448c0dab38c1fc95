"""The memories an NKI kernel addresses and the tensors in them.

HBM holds the kernel's inputs and outputs; SBUF and PSUM are on-chip, 2-D:
dimension 0 of a tile is the partition dimension (at most 128), the rest is
the free dimension (a legacy block tile marks its partition dimension with
nl.par_dim behind leading block dimensions). A tensor here is a torch tensor (on the CPU: for a
`neuron` argument, the arena's bytes seen from the host, so writes reach the
caller without a copy) plus what the checks need: its memory, whether it is
an input the kernel may write, which of its elements were written.

Allocating on-chip memory charges the launch's books: SBUF bytes per
partition against the profile's capacity, PSUM banks (2 KiB per partition
each) against 8. The charge is returned when the tile is no longer reachable
from the kernel (Python frees it), as the compiler reuses a buffer whose
tile is dead. New memory is filled with NaN (floats) or a fixed integer, so a
kernel that reads memory it never wrote sees it."""
from __future__ import annotations

import math
from typing import Any, Optional

import torch

from . import launch as _launch
from .dtypes import torch_dtype
from .launch import fail
from .index import AffineIndex, access_pattern, affine_to_slices, grid_view
from .on_chip import ParDim, charge, footprint_of

UNINITIALIZED_INT = 4  # what new integer memory holds (AWS's simulator uses the same value)


class Buffer:
    """A memory space: nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm, nl.private_hbm."""

    def __init__(self, name: str, on_chip: bool) -> None:
        self.name = name
        self.on_chip = on_chip
        self.space = name if on_chip else "hbm"  # what the engine rules distinguish

    def __repr__(self) -> str:
        return f"nl.{self.name}"

    @property
    def hbm(self) -> bool:
        return not self.on_chip


sbuf = Buffer("sbuf", True)
psum = Buffer("psum", True)
hbm = Buffer("hbm", False)
shared_hbm = Buffer("shared_hbm", False)
private_hbm = Buffer("private_hbm", False)
BUFFERS = {b.name: b for b in (sbuf, psum, hbm, shared_hbm, private_hbm)}


def buffer_of(buffer: Any) -> Buffer:
    if isinstance(buffer, Buffer):
        return buffer
    if isinstance(buffer, str) and buffer in BUFFERS:
        # Legacy kernels name buffers by string.
        return BUFFERS[buffer]
    raise fail("nl.ndarray", f"buffer={buffer!r} is not a memory space",
               "use nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm or nl.private_hbm")


def _fill_uninitialized(t: torch.Tensor) -> None:
    if t.dtype.is_floating_point:
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(UNINITIALIZED_INT)


class Allocation:
    """One allocation (or one kernel argument): its bytes and its books."""

    __slots__ = ("buffer", "name", "input_index", "mutable", "written", "acc", "marked", "unfilled", "charge",
                 "__weakref__")

    def __init__(self, buffer: Buffer, name: str, input_index: int = -1, mutable: bool = True) -> None:
        self.buffer = buffer
        self.name = name
        self.input_index = input_index  # position among the kernel's arguments, -1 for allocations
        self.mutable = mutable
        self.written: Optional[torch.Tensor] = None  # HBM: which elements the kernel wrote
        self.acc: Optional[torch.Tensor] = None      # PSUM: which elements hold an open accumulation
        # What `written` / `acc` hold over the whole allocation: True (all set), False (none), None (mixed):
        # the usual whole-tile cases then need neither a reduction nor a fill.
        self.marked: Optional[bool] = None
        # On-chip: the whole tensor, until its uninitialised fill is done. The fill waits for
        # the first access: a first write covering the whole tile makes it unnecessary.
        self.unfilled: Optional[torch.Tensor] = None
        self.charge: Optional[tuple] = None  # on-chip: (launch, "sbuf" or "psum", amount), returned at death

    def __del__(self) -> None:
        # Cheaper than a weakref.finalize per tile, and run at the same moment (the last reference goes).
        if self.charge is not None:
            launch, kind, amount = self.charge
            if kind == "sbuf":
                launch.sbuf_used -= amount
            else:
                launch.psum_banks_used -= amount

    def touch(self, whole_write: bool = False) -> None:
        """Before an access: fill new memory with the uninitialised pattern, unless the
        access overwrites all of it."""
        if self.unfilled is not None:
            if not whole_write:
                _fill_uninitialized(self.unfilled)
            self.unfilled = None


def mark(x: "NkiTensor", value: bool) -> None:
    """Sets x's books over its elements (HBM: written; PSUM: accumulation open)."""
    aux = x.aux
    if aux is None:
        return
    a = x.alloc
    if a.marked is value:
        return  # already so everywhere
    aux.fill_(value)
    books = a.acc if a.acc is not None else a.written
    a.marked = value if aux.numel() == books.numel() else None


def marks(x: "NkiTensor") -> Optional[bool]:
    """Whether x's books are set on all of its elements (True), on none (False) or on some (None)."""
    state = x.alloc.marked
    if state is not None:
        return state
    aux = x.aux
    if aux.device.type == "meta":
        return None
    if not aux.numel():
        return False
    # As bytes: torch's reductions over bool are an order of magnitude slower than over uint8.
    lo, hi = torch.aminmax(aux.view(torch.uint8))
    lo, hi = bool(lo), bool(hi)
    return lo if lo == hi else None


class NkiTensor:
    """A tensor in one memory (nl.ndarray's result, or a kernel argument), or
    a view of one (indexing with ints and slices gives views)."""

    __slots__ = ("t", "alloc", "aux", "oob")

    def __init__(self, t: torch.Tensor, alloc: Allocation, aux: Optional[torch.Tensor] = None,
                 oob: Optional[str] = None) -> None:
        self.t = t          # the values (a view of the allocation's tensor)
        self.alloc = alloc
        self.aux = aux      # the same view of alloc.written (HBM) or alloc.acc (PSUM)
        self.oob = oob      # set when the index left the tensor: the message, raised on use

    # --- what a kernel reads -------------------------------------------------
    @property
    def shape(self) -> tuple:
        return tuple(self.t.shape)

    @property
    def dtype(self) -> torch.dtype:
        return self.t.dtype

    @property
    def ndim(self) -> int:
        return self.t.dim()

    @property
    def buffer(self) -> Buffer:
        return self.alloc.buffer

    @property
    def name(self) -> str:
        return self.alloc.name

    def __len__(self) -> int:
        return self.t.shape[0]

    def __repr__(self) -> str:
        return f"NkiTensor(name='{self.name}', shape={self.shape}, dtype={self.dtype}, buffer={self.buffer!r})"

    def __bool__(self) -> bool:
        raise fail("tensor", f"the truth value of tensor '{self.name}' is not known when the kernel is compiled",
                   "branch on Python values (shapes, program_id), not on tile contents")

    # --- views -----------------------------------------------------------------
    def __getitem__(self, index: Any) -> "NkiTensor":
        return view(self, index, "indexing")

    def reshape(self, shape: Any) -> "NkiTensor":
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        if math.prod(shape) != self.t.numel():
            raise fail("reshape", f"tensor '{self.name}' of shape {self.shape} has {self.t.numel()} elements, "
                       f"not the {math.prod(shape)} of shape {shape}")
        if not self.t.is_contiguous():
            raise fail("reshape", f"tensor '{self.name}' is a strided view; reshape a whole tensor")
        aux = self.aux.reshape(shape) if self.aux is not None else None
        return NkiTensor(self.t.reshape(shape), self.alloc, aux)

    def broadcast_to(self, shape: Any) -> "NkiTensor":
        """A read-only view repeating size-1 dimensions (a DMA access pattern with stride 0)."""
        shape = tuple(shape)
        try:
            t = self.t.expand(shape)
        except RuntimeError:
            raise fail("broadcast_to", f"tensor '{self.name}' of shape {self.shape} does not broadcast to {shape}") \
                from None
        return NkiTensor(t, self.alloc, self.aux.expand(shape) if self.aux is not None else None, self.oob)

    ap = access_pattern  # t.ap([[stride, count], ...], offset): index.py
    # `t[...] = tile`, `t += tile` (isa.py) and `a + b` (language.py) are installed by the
    # modules that own those instructions.

    __hash__ = object.__hash__


def _index_parts(index: Any) -> tuple:
    return index if isinstance(index, tuple) else (index,)


def _plain_key(shape: Any, parts: tuple) -> Optional[tuple]:
    """`parts` when it is the usual index (ints and unit-step slices with bounds inside
    the tensor, at most one per dimension), usable as it is; None for everything else,
    which view() resolves and checks in full."""
    if len(parts) > len(shape):
        return None
    for p, size in zip(parts, shape):
        kind = type(p)
        if kind is slice:
            if p.step is not None and p.step != 1:
                return None
            start, stop = p.start, p.stop
            if start is None:
                start = 0
            elif type(start) is not int:
                return None
            if stop is None:
                stop = size
            elif type(stop) is not int:
                return None
            if not 0 <= start <= stop <= size:
                return None
        elif kind is not int or not 0 <= p < size:
            return None
    return parts


def view(x: NkiTensor, index: Any, instruction: str) -> NkiTensor:
    """x[index] for ints, slices and `...`; an index outside the tensor gives
    a view of the part inside it, marked out of bounds (dma_copy with
    oob_mode.skip copies that part; everything else raises)."""
    parts = _index_parts(index)
    key = _plain_key(x.t.shape, parts)
    if key is not None:
        return NkiTensor(x.t[key], x.alloc, x.aux[key] if x.aux is not None else None, x.oob)
    if any(isinstance(p, AffineIndex) for p in parts):
        grid = grid_view(x.t, parts, x.name, instruction)
        if grid is not None:  # ints and expressions on one grid: a strided view (legacy access patterns)
            aux = x.aux.as_strided(*grid_view(x.aux, parts, x.name, instruction)) if x.aux is not None else None
            return NkiTensor(x.t.as_strided(*grid), x.alloc, aux, x.oob)
        parts = affine_to_slices(parts, x.ndim)
    if sum(1 for p in parts if p is Ellipsis) > 1:
        raise fail(instruction, f"more than one '...' indexing tensor '{x.name}'")
    n_real = sum(1 for p in parts if p is not Ellipsis and p is not None)
    if n_real > x.ndim:
        raise fail(instruction, f"{n_real} indices for tensor '{x.name}' of {x.ndim} dimensions {x.shape}")
    if Ellipsis in parts:
        at = parts.index(Ellipsis)
        parts = parts[:at] + (slice(None),) * (x.ndim - n_real) + parts[at + 1:]
    out, oob = [], None
    dim = 0
    for p in parts:
        if p is None:
            out.append(None)
            continue
        size = x.t.shape[dim]
        if isinstance(p, bool) or not isinstance(p, (int, slice)) and not hasattr(p, "__index__"):
            if isinstance(p, NkiTensor):
                raise fail(instruction, f"tensor '{x.name}' indexed by tile '{p.name}' (indirect, data-dependent "
                           "addressing) is not supported by the simulator", "index with ints and slices")
            raise fail(instruction, f"index {p!r} of dimension {dim} of tensor '{x.name}' is not an int or a slice")
        if isinstance(p, slice):
            start, stop, step = p.start, p.stop, p.step
            step = 1 if step is None else int(step)
            if step <= 0:
                raise fail(instruction, f"slice step {step} on dimension {dim} of tensor '{x.name}': only positive "
                           "steps exist on the hardware")
            start = 0 if start is None else int(start)
            stop = size if stop is None else int(stop)
            if start < 0 or stop > size or start > stop:
                if oob is None:
                    oob = (f"access [{start}:{stop}] out of bounds on dimension {dim} of tensor '{x.name}' "
                           f"with shape {x.shape}")
                start, stop = max(0, min(start, size)), max(0, min(stop, size))
                stop = max(stop, start)
            out.append(slice(start, stop, step))
        else:
            i = int(p)
            if not 0 <= i < size:
                raise fail(instruction, f"index {i} out of bounds on dimension {dim} of tensor '{x.name}' with "
                           f"shape {x.shape}")
            out.append(i)
        dim += 1
    key = tuple(out)
    aux = x.aux[key] if x.aux is not None else None
    return NkiTensor(x.t[key], x.alloc, aux, oob or x.oob)


_names = [0]


def _new_name(buf: Buffer) -> str:
    _names[0] += 1
    return f"{buf.name}_tensor_{_names[0]}"


def allocate(shape: Any, dtype: Any, buffer: Any, name: Optional[str] = None, fill: Any = None) -> NkiTensor:
    launch = _launch.current()
    # A loop allocates the same tiles each iteration: their shape, dtype and partition checks
    # are done once per launch (the capacity check, which depends on what is live, every time).
    key = (shape, dtype, buffer) if type(shape) is tuple else None
    try:
        plan = launch.footprints.get(key)
    except TypeError:  # an unhashable dtype or shape element: no plan kept
        key = plan = None
    if plan is None or (key is not None and any(type(s) is ParDim for s in shape)):
        buf = buffer if isinstance(buffer, Buffer) else buffer_of(buffer)
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        # Legacy block tiles: nl.par_dim marks the partition dimension behind leading block dimensions.
        partition = next((i for i, s in enumerate(shape) if type(s) is ParDim), 0)
        shape = tuple(map(int, shape))
        if not shape or min(shape) <= 0:
            raise fail("nl.ndarray", f"shape {shape} of '{name or 'tensor'}': every dimension must be positive")
        dt = torch_dtype(dtype)
        if name is None:
            name = _new_name(buf)
        footprint = footprint_of(launch.limits, buf, shape, dt, name, partition) if buf.on_chip else None
        plan = (buf, shape, dt, footprint)
        if key is not None and not partition:  # a par_dim shape equals its plain ints: never cached
            launch.footprints[key] = plan
    buf, shape, dt, footprint = plan
    if name is None:
        name = _new_name(buf)
    alloc = Allocation(buf, name)
    if footprint is not None:
        kind, amount = charge(launch, buf, shape, dt, name, footprint)
        alloc.charge = (launch, kind, amount)
    if buf.hbm:
        return _hbm_tensor(launch, buf, shape, dt, name, fill)
    t = torch.empty(shape, dtype=dt, device=launch.device)
    if fill is None:
        alloc.unfilled = t
    else:
        t.fill_(fill)
    aux = None
    if buf is psum:
        alloc.acc = torch.zeros(shape, dtype=torch.bool, device=launch.device)
        alloc.marked = False
        aux = alloc.acc
    return NkiTensor(t, alloc, aux)


def _hbm_tensor(launch: "_launch.Launch", buf: Buffer, shape: tuple, dt: torch.dtype, name: str,
                fill: Any) -> NkiTensor:
    """An output in HBM: for a `neuron` caller, device memory seen from the host,
    so returning it costs no copy. The instances of a grid share their
    nl.shared_hbm tensors: the k-th one each instance allocates is the same."""
    if buf is shared_hbm and launch.grid:
        k = launch.shared_next
        launch.shared_next += 1
        if k < len(launch.shared):
            prev = launch.shared[k]
            if prev.shape != shape or prev.dtype != dt:
                raise fail("nl.ndarray", f"instance allocates shared_hbm tensor #{k} '{name}' as {shape} {dt}, "
                           f"the first instance allocated it as {prev.shape} {prev.dtype}",
                           "every instance of a grid allocates the same shared outputs")
            return prev
    if launch.hbm_factory is not None:
        t = launch.hbm_factory(shape, dt)
    else:
        t = torch.empty(shape, dtype=dt, device=launch.device)
    if fill is None:
        _fill_uninitialized(t)
    else:
        t.fill_(fill)
    alloc = Allocation(buf, name)
    alloc.written = torch.full(shape, fill is not None, dtype=torch.bool, device=t.device)
    alloc.marked = fill is not None
    out = NkiTensor(t, alloc, alloc.written)
    if buf is shared_hbm and launch.grid:
        launch.shared.append(out)
    return out


def argument(t: torch.Tensor, name: str, index: int, mutable: bool) -> NkiTensor:
    """A kernel argument: a tensor in HBM (the caller's memory)."""
    # Only outputs need per-element books; an input's writes are checked as they happen.
    return NkiTensor(t, Allocation(hbm, name, index, mutable))
