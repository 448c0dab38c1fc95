// A collective on a CPU tensor in a group that has only the neuron backend
// (init_process_group("neuron")) would fail deep in c10d with "No backend type
// associated with device type cpu". This kernel, on the AutogradCPU key of the
// c10d collectives (which have no autograd kernel of their own), runs before
// c10d's CPU kernel and names the fix instead; for any other group it passes
// straight through.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/library.h>

#include <algorithm>

namespace neuron_sim::distributed {
namespace {

constexpr const char* kProcessGroupType = "__torch__.torch.classes.c10d.ProcessGroup";

void checkCpuCollective(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  for (size_t i = stack->size() - n; i < stack->size(); ++i) {
    const c10::IValue& v = (*stack)[i];
    if (!v.isObject()) continue;
    auto type_name = v.toObjectRef().type()->name();
    if (!type_name || type_name->qualifiedName() != kProcessGroupType) continue;
    auto pg = v.toCustomClass<c10d::ProcessGroup>();
    auto devices = pg->getDeviceTypes();
    bool has_cpu = std::any_of(devices.begin(), devices.end(), [](const c10::Device& d) { return d.is_cpu(); });
    bool has_neuron = std::any_of(devices.begin(), devices.end(),
                                  [](const c10::Device& d) { return d.type() == c10::DeviceType::PrivateUse1; });
    TORCH_CHECK(has_cpu || !has_neuron, "neuron process group: ", op.schema().name(),
                " got a CPU tensor, but this group has only the neuron backend (it was created with backend "
                "'neuron'). Move the tensor to the device with tensor.to('neuron'), or create the group with "
                "init_process_group('cpu:gloo,neuron:neuron') so that CPU tensors use gloo.");
    break;
  }
  op.redispatchBoxed(ks & c10::after_autograd_keyset, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(c10d, AutogradCPU, m) {
  for (const char* name : {"allreduce_", "allreduce_coalesced_", "allgather_", "_allgather_base_",
                           "allgather_coalesced_", "allgather_into_tensor_coalesced_", "broadcast_", "reduce_",
                           "reduce_scatter_", "_reduce_scatter_base_", "reduce_scatter_tensor_coalesced_",
                           "alltoall_", "alltoall_base_", "gather_", "scatter_", "send", "recv_",
                           "recv_any_source_"})
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&checkCpuCollective>());
}

}  // namespace neuron_sim::distributed
