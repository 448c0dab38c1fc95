"""nki.typing (legacy: neuronxcc.nki.typing, imported as `nt`): annotating a
kernel parameter `nt.mutable_tensor` lets the kernel write that input in place."""
from __future__ import annotations


class mutable_tensor:
    """Annotation: the kernel may write this input; the caller sees the writes."""


tensor = object  # an ordinary (immutable) tensor parameter
