"""The error a kernel gets when it breaks a rule of the hardware or of the
language. Like AWS's simulator, every instruction checks its operands before
it runs and raises naming the instruction, the operand and the limit; here the
message also names the kernel and says what to do (`launch.fail`, which reads
the kernel the thread is running)."""
from __future__ import annotations


class NKIError(RuntimeError):
    """A kernel broke a hardware or language rule (nothing after the failing
    instruction ran; tensors the kernel had already written keep those writes)."""


def legacy(feature: str, current: str) -> NKIError:
    """A feature of the legacy neuronxcc.nki dialect the simulator does not run."""
    return NKIError(f"{feature} is legacy NKI (neuronxcc.nki) and not supported by the simulator: {current}")
