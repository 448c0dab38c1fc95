"""The error a kernel gets when it breaks a rule of the hardware or of the
language. Like AWS's simulator, every instruction checks its operands before
it runs and raises naming the instruction, the operand and the limit; here the
message also names the kernel and says what to do."""
from __future__ import annotations


class NKIError(RuntimeError):
    """A kernel broke a hardware or language rule (nothing after the failing
    instruction ran; tensors the kernel had already written keep those writes)."""


def fail(instruction: str, message: str, hint: str = "") -> NKIError:
    from .state import current_or_none
    launch = current_or_none()
    where = f" (kernel '{launch.kernel_name}'{launch.where()})" if launch is not None else ""
    text = f"{instruction}: {message}{where}"
    if hint:
        text += f". {hint}"
    return NKIError(text)


def legacy(feature: str, current: str) -> NKIError:
    """A feature of the legacy neuronxcc.nki dialect the simulator does not run."""
    return NKIError(f"{feature} is legacy NKI (neuronxcc.nki) and not supported by the simulator: {current}")
