"""Streams and events on neuron, with torch.cuda's and torch_neuronx's names.

A stream is an ordered queue of work on one device; an event marks a point in
a stream. In this emulator every kernel finishes before its launch returns
(as torch_neuronx does with NEURON_LAUNCH_BLOCKING=1), so by the time Python
sees a stream or an event, the work before it is done: queries return True,
waits return at once, and an event's timestamp is taken when it is recorded,
so elapsed_time measures the work launched between two records. The state
(current stream per thread and device, stream ids, event records) lives in
C++ (csrc/aten/device/guard.cpp), so torch.Stream, torch.Event and torch.accelerator
see the same streams as these classes. stream_check.py finds the missing waits
that synchronous execution hides.
"""
from __future__ import annotations

from typing import Any, Optional

import torch

from .. import _C
from .. import environment
from .device import _checked, _DeviceLike, _set_thread_device, current_device, set_device
from .device import synchronize  # re-exported: torch.neuron.synchronize

# c10::DeviceType::PrivateUse1: the device type number torch.Stream carries.
_DEVICE_TYPE = 20

__all__ = [
    "Event", "Stream", "StreamContext", "current_stream", "default_stream", "launch_blocking", "query",
    "record_event", "set_stream", "stream", "synchronize", "wait_event", "wait_stream",
]


def launch_blocking() -> bool:
    """Whether NEURON_LAUNCH_BLOCKING asks for synchronous launches ("1").

    torch_neuronx queues work asynchronously when it is "0" (errors may then
    surface at the next synchronize) and runs each op to completion when it
    is "1". The emulator always does the latter, which is also a valid
    schedule of the asynchronous mode; the variable is read for code that
    branches on it (the package sets it to "1" if it is unset)."""
    return environment.flag("NEURON_LAUNCH_BLOCKING", True)


class Stream(torch.Stream):
    """A queue of work on one neuron device (torch.cuda.Stream's shape).

    Stream(device=None, priority=0) creates a new stream on `device` (the
    current device by default). Stream(stream_id=..., device_index=...,
    device_type=...) wraps an existing one."""

    def __new__(cls, device: _DeviceLike = None, priority: int = 0, **kwargs: Any) -> "Stream":
        if kwargs:  # an existing stream, from its (id, index, type) triple
            return super().__new__(cls, **kwargs)
        index = _checked(device)
        return super().__new__(cls, device=torch.device("neuron", index), priority=priority)

    def wait_event(self, event: torch.Event) -> None:
        """Work queued on this stream after this call waits for `event`."""
        event.wait(self)

    def wait_stream(self, stream: torch.Stream) -> None:
        """Work queued on this stream after this call waits for all work queued on `stream` so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event: Optional[torch.Event] = None) -> torch.Event:
        """Records `event` (a new one if None) on this stream and returns it."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    def __repr__(self) -> str:
        return f"<torch.neuron.Stream device=neuron:{self.device_index} stream_id={self.stream_id}>"


class _EventType(type):
    # Every event on neuron counts as a torch.neuron.Event, torch.Event("neuron") ones
    # included, so code that checks isinstance before waiting works with both.
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, torch.Event) and obj.device is not None and obj.device.type == "neuron"


class Event(torch.Event, metaclass=_EventType):
    """A marker in a stream: record it, wait on it, query it, time between two.

    Event(enable_timing=False, blocking=False, interprocess=False) is the
    device's own event class: a torch.Event on neuron (PyTorch's C++ methods
    take it as any torch.Event, and it mixes freely with torch.Stream and
    torch.accelerator). elapsed_time needs enable_timing=True on both events;
    the device raises RuntimeError "Event was not created with timing enabled"
    otherwise (a generic torch.Event keeps PyTorch's ValueError). Interprocess
    events are not supported (the emulated device memory cannot be shared
    between processes)."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False,  # type: ignore[misc]
                interprocess: bool = False) -> "Event":
        if interprocess:
            raise NotImplementedError("neuron: interprocess events are not supported; the emulated device "
                                      "memory lives in one process. Create the Event with interprocess=False.")
        event = super().__new__(cls, device="neuron", enable_timing=enable_timing, blocking=blocking)
        event._enable_timing = bool(enable_timing)
        return event

    def elapsed_time(self, end_event: torch.Event) -> float:
        """Milliseconds between this event's record and `end_event`'s."""
        if not self._enable_timing or not getattr(end_event, "_enable_timing", True):
            raise RuntimeError("Event was not created with timing enabled")
        if type(end_event) is torch.Event:
            return super().elapsed_time(end_event)
        if not isinstance(end_event, torch.Event):
            raise TypeError(f"elapsed_time expects a torch.Event, got {type(end_event).__name__}")
        # Another torch.neuron.Event: PyTorch's C++ method takes torch.Event itself only as
        # its argument, so the backend is asked directly, after InlineEvent's own check.
        if not self.event_id or not end_event.event_id:
            raise ValueError("Both events must be recorded before calculating elapsed time.")
        return _C._event_elapsed_time(self.event_id, end_event.event_id)


def current_stream_id(index: int) -> int:
    """The id of the calling thread's current stream on device `index` (no Stream object made)."""
    return _C._current_stream_id(index)


def current_stream(device: _DeviceLike = None) -> Stream:
    """The calling thread's current stream on `device` (the current device by default)."""
    i = _checked(device)
    return Stream(stream_id=current_stream_id(i), device_index=i, device_type=_DEVICE_TYPE)


def default_stream(device: _DeviceLike = None) -> Stream:
    """Stream 0 of `device`: where work goes unless another stream is made current."""
    return Stream(stream_id=0, device_index=_checked(device), device_type=_DEVICE_TYPE)


def set_stream(stream: Optional[torch.Stream]) -> None:
    """Makes `stream` current on its device, and its device current, for this
    thread (None: no change), as torch.cuda.set_stream does."""
    if stream is None:
        return
    _check_neuron_stream(stream)
    set_device(stream.device_index)
    _C._set_current_stream(stream.device_index, stream.stream_id)


def _check_neuron_stream(stream: torch.Stream) -> None:
    if stream.device_type != _DEVICE_TYPE:
        raise ValueError(f"Expected a neuron stream but got a stream of {stream.device}")


class StreamContext:
    """Context manager making `stream` current (and its device current) for
    its body; restores both on exit. None makes it a no-op, as on cuda."""

    def __init__(self, stream: Optional[torch.Stream]):
        self.stream = stream
        self.prev_device = -1
        self.prev_stream: Optional[Stream] = None
        self.prev_stream_on_target: Optional[Stream] = None

    def __enter__(self) -> Optional[torch.Stream]:
        if self.stream is None:
            return None
        _check_neuron_stream(self.stream)
        self.prev_device = current_device()
        self.prev_stream = current_stream(self.prev_device)
        target = self.stream.device_index
        if target != self.prev_device:
            self.prev_stream_on_target = current_stream(target)
            _set_thread_device(target)
        _C._set_current_stream(target, self.stream.stream_id)
        return self.stream

    def __exit__(self, *exc: Any) -> bool:
        if self.stream is None:
            return False
        if self.prev_stream_on_target is not None:
            _C._set_current_stream(self.stream.device_index, self.prev_stream_on_target.stream_id)
        _C._set_current_stream(self.prev_device, self.prev_stream.stream_id)
        _set_thread_device(self.prev_device)
        return False


def stream(stream: Optional[torch.Stream]) -> StreamContext:
    """`with torch.neuron.stream(s):` queues the body's work on `s`."""
    return StreamContext(stream)


def wait_stream(stream: torch.Stream) -> None:
    """The current stream waits for all work queued on `stream` so far."""
    current_stream().wait_stream(stream)


def wait_event(event: torch.Event) -> None:
    """The current stream waits for `event`."""
    current_stream().wait_event(event)


def record_event(event: Optional[torch.Event] = None) -> torch.Event:
    """Records `event` (a new one if None) on the current stream."""
    return current_stream().record_event(event)


def query() -> bool:
    """True when all work queued on the current stream is done."""
    return current_stream().query()
