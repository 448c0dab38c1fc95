"""Inductor on the `neuron` device: the one place the emulator adapts
PyTorch's compiler (torch 2.13; tests/compile/test_compile.py runs it against the
pinned version). Arena memory is host memory, so Inductor's CPU code
generation (C++ kernels, fused loops) can run on neuron tensors unchanged:
the generated kernels take raw pointers, the wrapper allocates its buffers
with empty_strided(device="neuron") (our allocator, in the arena), and ops
Inductor leaves as extern calls (mm, addmm, custom ops) go through the
dispatcher to the device's native path.

What Inductor needs to accept a device it does not know, all scoped to
"neuron" (nothing changes for other devices):
  1. a Dynamo device interface (else "No interface for device neuron");
  2. CppScheduling as the device's scheduling, and a wrapper codegen that
     emits plain kernel calls for it (Inductor's own raises "device neuron nyi");
  3. the CPU device-op overrides (no streams, no device guard code), and
     buffers allocated by the launch's own entry point
     (_C._empty_strided_neuron), as CPU graphs allocate through
     empty_strided_cpu rather than torch.empty_strided;
  4. the scheduler's "is this a CPU node" test (fusion and loop order rules
     of the C++ backend) answering yes for neuron nodes;
  5. "which code generator serves this device" (utils.get_current_backend)
     answering the CPU's for neuron: for a device it does not know Inductor
     answers "triton", and the C++ kernels then take Triton's code paths
     (masked loads of a concatenation fail: 'str' object has no attribute
     'dtype').
Ops the device keeps whole that Inductor has no lowering for are given as
their definition (`decompositions`): linear_backward, which a graph of
Linear layers has in its backward, else runs as an opaque call between
Inductor's kernels, its bias gradient a reduction of its own instead of one
fused into a neighbouring loop.
Inductor drops the device index in the code it emits; the executor runs
each graph under a device guard for its own device (executors.py)."""
from __future__ import annotations

import functools
from pathlib import Path

import torch

DEVICE = "neuron"


@functools.cache
def register() -> None:
    from torch._dynamo.device_interface import CpuInterface, register_interface_for_device
    from torch._inductor import scheduler
    from torch._inductor.codegen.common import register_backend_for_device, register_device_op_overrides
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.codegen.cpu_device_op_overrides import CpuDeviceOpOverrides
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
    from torch._inductor.custom_graph_pass import CustomGraphModulePass, get_hash_for_files

    class NeuronInterface(CpuInterface):
        """Host-side queries Inductor makes about the device (no streams to order)."""

        @staticmethod
        def current_device() -> int:
            return torch.neuron.current_device()

        @staticmethod
        def device_count() -> int:
            return torch.neuron.device_count()

        @staticmethod
        def is_triton_capable(device=None) -> bool:
            return False

    class NeuronWrapperCodegen(PythonWrapperCodegen):
        """The Python wrapper, with the CPU form of kernel calls for neuron."""

        @staticmethod
        def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
            if is_subgraph:
                return SubgraphPythonWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
            return NeuronWrapperCodegen()

        def write_header(self) -> None:
            super().write_header()
            self.header.splice("from torch_neuron_sim._C import _empty_strided_neuron as empty_strided_neuron")

        def make_allocation(self, name, device, dtype, shape, stride, allocation_shape=None, is_pinned=False):
            # A buffer on the device: the launch's own allocation entry point
            # (bindings/compile_bindings.cpp), as empty_strided_cpu is the
            # CPU's, instead of torch.empty_strided(device='neuron').
            from torch._inductor import config
            if device.type != DEVICE or is_pinned or config.test_configs.track_memory_lifecycle:
                return super().make_allocation(name, device, dtype, shape, stride, allocation_shape, is_pinned)
            cpu = super().make_allocation(name, torch.device("cpu"), dtype, shape, stride, allocation_shape)
            prefix = f"{name} = empty_strided_cpu("
            assert cpu.startswith(prefix), cpu  # Inductor's form of a CPU allocation (torch 2.13)
            return f"{name} = empty_strided_neuron(" + cpu[len(prefix):]

        def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, **kwargs):
            from torch._inductor.virtualized import V
            device = device or V.graph.get_current_device_or_throw()
            if not triton and device.type == DEVICE:
                self.writeline(self.wrap_kernel_call(kernel_name, call_args))
                return
            super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)

    class AdapterVersion(CustomGraphModulePass):
        """Changes no graph. Its uuid, the code of this package (the adapter,
        and the backend's settings for AOTAutograd, which the key does not
        hold all of: donated buffers), is part of the key of Inductor's on-disk
        cache, so neuron code generated by another version is not reused."""

        def __call__(self, gm: torch.fx.GraphModule) -> None:
            return None

        def uuid(self) -> bytes:
            return get_hash_for_files(tuple(sorted(str(p) for p in Path(__file__).parent.glob("*.py"))))

    register_interface_for_device(DEVICE, NeuronInterface)
    register_backend_for_device(DEVICE, CppScheduling, NeuronWrapperCodegen, device_custom_pass=AdapterVersion())
    register_device_op_overrides(DEVICE, CpuDeviceOpOverrides())

    is_cpu = scheduler.BaseSchedulerNode.is_cpu

    def is_cpu_or_neuron(self) -> bool:
        device = self.get_device()
        return device is not None and device.type == DEVICE or is_cpu(self)

    scheduler.BaseSchedulerNode.is_cpu = is_cpu_or_neuron

    from torch._inductor import config, utils
    from torch._inductor.codegen import common
    from torch._inductor.kernel import mm_common
    from torch._inductor.virtualized import V
    current_backend = utils.get_current_backend

    def current_backend_with_neuron(device_type: str | None = None) -> str:
        if (device_type or V.graph.get_current_device_or_throw().type) == DEVICE:
            return config.cpu_backend
        return current_backend(device_type)

    # Every module that imported the function by name gets the wrapper.
    for module in (utils, common, scheduler, mm_common):
        if getattr(module, "get_current_backend", None) is current_backend:
            module.get_current_backend = current_backend_with_neuron


def decompositions() -> dict:
    """Inductor's decompositions for the device's native ops that Inductor
    keeps as opaque calls: what the graph compiler lowers them to."""
    aten = torch.ops.aten
    return {aten.linear_backward.default: _linear_backward}


def _linear_backward(input, grad_output, weight, output_mask):
    # The device kernel's formulas (aten/kernels/emulated_kernels.cpp): g @ W
    # for the input, g^T x (the product CPU autograd computes, so the weight
    # gradient rounds as on the CPU) and the sum of g for weight and bias.
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        grad_input = torch.matmul(grad_output, weight)
    if output_mask[1] or output_mask[2]:
        g2 = grad_output.reshape(-1, grad_output.shape[-1])
        grad_weight = g2.t().mm(input.reshape(-1, input.shape[-1]))
        grad_bias = g2.sum(0)
    return grad_input, grad_weight, grad_bias


def inductor_decompositions() -> dict:
    """For the Inductor executor: the table Inductor decomposes a CPU graph
    with, plus definitions of the device's native ops it has no lowering for
    (inductor_device.py). The graph is traced once, with this table: a graph
    decomposed by one table and then retraced by another could reach a view
    whose input the second table laid out differently (a permuted attention
    output reshaped to 3 dimensions), which no CPU graph does."""
    from torch._inductor.decomposition import select_decomp_table
    return {**select_decomp_table(), **decompositions()}
