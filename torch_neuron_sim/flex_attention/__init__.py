"""FlexAttention (`torch.nn.attention.flex_attention`) on the neuron device.

PyTorch runs FlexAttention through two higher-order ops, `flex_attention` and
`flex_attention_backward`, with a fused kernel generated per device (Triton on
CUDA, C++ on the CPU). TorchNeuron has no such kernel: its compile path
rewrites both ops into ordinary ATen ops (decomposition.py), so the compiled
graph holds only ops the device runs natively (compile/flex_attention.py
does the rewrite here).

Eager mode needs two things from torch 2.13, done once at import by install():

- its device check (`torch.nn.attention.flex_attention._validate_device`)
  accepts only cuda, cpu, xpu, hpu and mps and raises "FlexAttention is only
  supported on CUDA, CPU, HPU, or MPS devices" for anything else. TorchNeuron's
  own GPT-OSS example widens that check for `neuron`; so does install(), for
  `neuron` tensors only: every other device keeps torch's check unchanged
  (including its refusal of a CPU backward).
- a kernel for the higher-order ops on the device's dispatch key: the same
  decomposition the compile path inlines, forward and backward (autograd
  reaches the backward through PyTorch's own FlexAttention autograd function).
"""
from __future__ import annotations

from . import decomposition

_installed = False


def install() -> None:
    """Widen torch's FlexAttention device check to `neuron` and register the
    decomposition as the device's kernel of both higher-order ops. Idempotent."""
    global _installed
    if _installed:
        return
    import importlib

    from torch._C import DispatchKey

    api = importlib.import_module("torch.nn.attention.flex_attention")
    # the module: torch._higher_order_ops exports the op itself under the module's name
    hops = importlib.import_module("torch._higher_order_ops.flex_attention")

    torch_check = api._validate_device

    def _validate_device(query, key, value):
        if query.device.type == "neuron":
            return  # forward and backward run as ATen ops on the device (decomposition.py)
        torch_check(query, key, value)

    _validate_device.__doc__ = torch_check.__doc__
    api._validate_device = _validate_device
    hops.flex_attention.py_impl(DispatchKey.PrivateUse1)(decomposition.flex_attention_forward)
    hops.flex_attention_backward.py_impl(DispatchKey.PrivateUse1)(decomposition.flex_attention_backward)
    _installed = True
