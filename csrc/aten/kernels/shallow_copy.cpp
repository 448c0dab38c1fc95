// `tensor.data = other` across CPU and neuron. PyTorch asks
// _has_compatible_shallow_copy_type before shallow-copying `other` into
// `tensor`; the device's C++ kernel (recorded as
// "aten::_has_compatible_shallow_copy_type") answers yes for the same device
// type and for a CPU/neuron pair. The shallow copy takes the source's dispatch
// keys, so after `x.data = cpu_tensor` x is a plain CPU tensor and later
// in-place ops run on the CPU (FSDP's CPU offload relies on it).
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <torch/library.h>

#include "aten/neuron.h"
#include "aten/execution/op_table.h"

namespace neuron_sim {
namespace {

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  static OpEntry& tracked = kernelEntry("aten::_has_compatible_shallow_copy_type", "");
  recordKernelRun(tracked);
  const auto a = self.device().type(), b = from.device().type();
  return a == b || (a == c10::kCPU && b == kNeuron) || (a == kNeuron && b == c10::kCPU);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

}  // namespace neuron_sim
