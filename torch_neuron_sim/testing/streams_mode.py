"""Multi-stream mode for a test. The device runs one stream per NeuronCore
unless NEURON_RT_ENABLE_HOST_CC=1, which the runtime reads once per process;
torch_neuronx's `requires_nrt_streams` sets it per test (its suites fork a
process per test). Here the emulator re-reads it on entry and exit, so one
process can hold both kinds of tests:

    @requires_nrt_streams()
    def test_two_streams(): ...
"""
from __future__ import annotations

import contextlib
import os

from .. import _C

_VAR = "NEURON_RT_ENABLE_HOST_CC"


class requires_nrt_streams(contextlib.ContextDecorator):
    """NEURON_RT_ENABLE_HOST_CC=1 inside the block: torch.neuron.Stream() gives distinct streams."""

    def __enter__(self) -> "requires_nrt_streams":
        self._saved = os.environ.get(_VAR)
        os.environ[_VAR] = "1"
        _C._reread_host_cc()
        return self

    def __exit__(self, *exc: object) -> bool:
        if self._saved is None:
            os.environ.pop(_VAR, None)
        else:
            os.environ[_VAR] = self._saved
        _C._reread_host_cc()
        return False
