"""The stream-order checker: catches cross-stream use of a tensor without the
wait that hardware needs.

The emulator runs every kernel to completion at launch, so a program that
reads on stream B what stream A wrote, without `B.wait_stream(A)` or an
event, gets the right numbers here and a race on Trainium (or any GPU). Inside
`with torch_neuron_sim.stream_check.check_stream_order():` every op on a
neuron tensor is checked against happens-before books kept in C++
(csrc/runtime/stream_order.cpp: one vector clock per stream, updated by event
records, waits and host synchronizes), and an unordered access raises
StreamOrderError naming both ops and streams. Like cuda's stream sanitizer it
tracks whole storages and costs a Python call per op: a debugging tool.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .. import _C
from .device import _index
from .streams import _DEVICE_TYPE, current_stream_id

__all__ = ["StreamOrderError", "check_stream_order"]


class StreamOrderError(RuntimeError):
    """An op used a tensor that an op on another stream accessed, with no
    event, wait or synchronize ordering the two."""


class _Access:
    __slots__ = ("stream", "n", "op")

    def __init__(self, stream: tuple[int, int], n: int, op: str):
        self.stream, self.n, self.op = stream, n, op


class _History:
    __slots__ = ("write", "reads", "alloc", "recorded")

    def __init__(self, alloc: Optional[tuple[int, int]] = None) -> None:
        self.write: Optional[_Access] = None
        self.reads: list[_Access] = []
        self.alloc = alloc                      # the stream whose op allocated the memory
        self.recorded: set[tuple[int, int]] = set()  # streams named by record_stream


def _neuron_tensors(value: Any) -> list[torch.Tensor]:
    flat, _ = tree_flatten(value)
    return [t for t in flat if isinstance(t, torch.Tensor) and t.device.type == "neuron"]


class _StreamOrderMode(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.storages: dict[tuple[int, int], _History] = {}

    def _devices(self, args: tuple, kwargs: dict) -> list[int]:
        """The neuron devices an op touches: its tensors' and its device= argument's."""
        found = {t.device.index for t in _neuron_tensors((args, kwargs))}
        dev = kwargs.get("device")
        if dev is not None and torch.device(dev).type == "neuron":
            found.add(_index(dev))
        return sorted(found)

    def _check(self, t: torch.Tensor, write: bool, now: _Access) -> None:
        key = (t.device.index, t.untyped_storage().data_ptr())
        h = self.storages.setdefault(key, _History())
        earlier = ([h.write] if h.write else []) + (h.reads if write else [])
        for a in earlier:
            if not _C._order_before(a.stream[0], a.stream[1], a.n, now.stream[0], now.stream[1]):
                kind = "writes" if write else "reads"
                prior = "wrote" if a is h.write else "read"
                raise StreamOrderError(
                    f"neuron stream-order check: {now.op} on neuron:{now.stream[0]} stream {now.stream[1]} {kind} "
                    f"a tensor that {a.op} on stream {a.stream[1]} {prior}, and nothing orders the two: on hardware "
                    f"they may run concurrently. Make stream {now.stream[1]} wait first "
                    f"(stream.wait_stream(other), stream.wait_event(event)) or synchronize.")
        if write:
            h.write, h.reads = now, []
        else:
            h.reads.append(now)

    def _reused(self, h: _History, now: _Access) -> None:
        # A caching allocator hands a freed block back to the stream it was
        # allocated on at once, unless record_stream named the other streams
        # that used it: those may still be reading or writing it.
        if h.alloc != now.stream:
            return  # the real allocator would not give this block to another stream
        for a in ([h.write] if h.write else []) + h.reads:
            if a.stream != now.stream and a.stream not in h.recorded and not _C._order_before(
                    a.stream[0], a.stream[1], a.n, now.stream[0], now.stream[1]):
                raise StreamOrderError(
                    f"neuron stream-order check: {now.op} on neuron:{now.stream[0]} stream {now.stream[1]} reuses "
                    f"the memory of a freed tensor that {a.op} on stream {a.stream[1]} used, and nothing orders "
                    f"the two: on hardware stream {a.stream[1]} may still be using it. Call "
                    f"tensor.record_stream(that stream) before freeing the tensor, or make stream "
                    f"{now.stream[1]} wait for it.")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten.record_stream.default:
            t, s = args[0], args[1]
            self.storages.setdefault((t.device.index, t.untyped_storage().data_ptr()), _History()).recorded.add(
                (s.device_index, s.stream_id))
            return func(*args, **kwargs)
        devices = self._devices(args, kwargs)
        if not devices:
            return func(*args, **kwargs)
        returns = func._schema.returns
        if any(r.alias_info is not None and not r.alias_info.is_write for r in returns):
            return func(*args, **kwargs)  # a view: metadata only, no device access
        streams = {d: (d, current_stream_id(d)) for d in devices}
        if len(streams) > 1:
            _barrier(list(streams.values()))  # a cross-device copy orders both devices' current streams
        name = str(func.name())
        at = {d: _Access(s, _C._order_tick(*s), name) for d, s in streams.items()}
        written = set()
        for i, arg in enumerate(func._schema.arguments):
            value = args[i] if i < len(args) else kwargs.get(arg.name)
            is_write = arg.alias_info is not None and arg.alias_info.is_write
            for t in _neuron_tensors(value):
                self._check(t, is_write, at[t.device.index])
                if is_write:
                    written.add(t.untyped_storage().data_ptr())
        out = func(*args, **kwargs)
        for t in _neuron_tensors(out):  # results: written by this op on their device's stream
            if t.untyped_storage().data_ptr() in written:
                continue
            if t.device.index not in at:  # a device only the result names
                s_out = (t.device.index, current_stream_id(t.device.index))
                at[t.device.index] = _Access(s_out, _C._order_tick(*s_out), name)
            now = at[t.device.index]
            key = (t.device.index, t.untyped_storage().data_ptr())
            h = self.storages.get(key)
            if h is not None and h.write is not None and h.write.n == now.n and h.write.stream == now.stream:
                continue  # several results in one storage
            fresh = self.storages[key] = _History(alloc=now.stream)
            fresh.write = now
            if h is not None and key[1] != 0:
                self._reused(h, now)  # after the new history is in place: reported once
        return out


def _barrier(streams: list[tuple[int, int]]) -> None:
    # Every stream waits for every other, through events (which the guard
    # enters in the happens-before books), as cuda's peer copies do.
    refs = [torch.Stream(stream_id=sid, device_index=d, device_type=_DEVICE_TYPE) for d, sid in streams]
    events = []
    for r in refs:
        e = torch.Event(device="neuron")
        e.record(r)
        events.append(e)
    for r in refs:
        for e in events:
            e.wait(r)


@contextlib.contextmanager
def check_stream_order() -> Iterator[None]:
    """Checks, for the duration of the block, that every neuron tensor used
    on one stream after another stream touched it is ordered by an event, a
    wait or a synchronize. Raises StreamOrderError at the first violation."""
    _C._order_tracking(True)
    try:
        with _StreamOrderMode():
            yield
    finally:
        _C._order_tracking(False)
