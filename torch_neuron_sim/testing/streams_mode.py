"""Multi-stream mode for a test. The device runs one stream per NeuronCore
unless NEURON_RT_ENABLE_HOST_CC=1, which it reads whenever a stream is
created; torch_neuronx's `requires_nrt_streams` sets it for the test:

    @requires_nrt_streams()
    def test_two_streams(): ...
"""
from __future__ import annotations

import contextlib
import os

_VAR = "NEURON_RT_ENABLE_HOST_CC"


class requires_nrt_streams(contextlib.ContextDecorator):
    """NEURON_RT_ENABLE_HOST_CC=1 inside the block: torch.neuron.Stream() gives distinct streams."""

    def __enter__(self) -> "requires_nrt_streams":
        self._saved = os.environ.get(_VAR)
        os.environ[_VAR] = "1"
        return self

    def __exit__(self, *exc: object) -> bool:
        if self._saved is None:
            os.environ.pop(_VAR, None)
        else:
            os.environ[_VAR] = self._saved
        return False
