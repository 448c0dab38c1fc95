// Memory formats as TorchNeuron's release build has them. Allocation in
// channels_last works (factories.cpp) and clone writes it (copy.cpp), but the
// device's contiguous and _to_copy implementations accept only contiguous or
// preserve format. A refused call is a failing implementation, so it falls
// back to the CPU - recorded as a fallback, its result returned on the device
// in the asked layout - unless TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1,
// which turns it into the device's error.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <ATen/ATen.h>
#include <ATen/ops/_to_copy_native.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "aten/execution/execution.h"
#include "aten/execution/fallback_policy.h"
#include "aten/execution/op_table.h"
#include "aten/neuron.h"

namespace neuron_sim {
namespace {

bool channelsLast(c10::MemoryFormat mf) {
  return mf == c10::MemoryFormat::ChannelsLast || mf == c10::MemoryFormat::ChannelsLast3d;
}

// The device's implementation refuses the format; under the fallback-only
// switch that is the user's error, in the device's words.
void refuseUnlessFallback(const char* op) {
  if (fallbackOnlyForUnimplemented())
    raiseImplementationError(op, "Neuron tensors only support contiguous or preserve memory format");
}

// One call through the op's boxed path: it is not a native op, so this is the
// tracked CPU fallback (inputs to the host, the CPU op, results back).
at::Tensor viaFallback(const c10::OperatorHandle& op, torch::jit::Stack stack) {
  runBoxed(op, &stack);
  return stack.back().toTensor();
}

// contiguous returns an alias of its input in its schema, which PyTorch's
// boxed CPU fallback refuses for any op; this one is tracked as that fallback
// tracks one (counted, announced once, reported), its input copied to the
// host, contiguous run there, and the result copied back in its layout.
at::Tensor hostContiguous(const at::Tensor& self, c10::MemoryFormat mf) {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::contiguous", "");
  OpEntry& e = opEntry(op);
  e.fallbacks.fetch_add(1, std::memory_order_relaxed);
  if (fallbackMode() == FallbackMode::kError) raiseFallbackDisabled(e, FallbackWhy::kMemoryFormat);
  if (!e.announced.load(std::memory_order_relaxed)) announceFallback(e, FallbackWhy::kMemoryFormat);
  if (C10_UNLIKELY(reportActive())) reportFallback(e);
  return self.cpu().contiguous(mf).to(self.device());
}

// The fallback's gradient is contiguous's: the identity.
struct HostContiguous : public torch::autograd::Function<HostContiguous> {
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& self, int64_t mf) {
    return hostContiguous(self, static_cast<c10::MemoryFormat>(mf));
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grad) {
    return {grad[0], at::Tensor()};
  }
};

// contiguous, registered by the device on its own keys (PyTorch would
// decompose it into clone): preserve_format is accepted and means contiguous.
at::Tensor contiguous(const at::Tensor& self, c10::MemoryFormat mf) {
  if (mf == c10::MemoryFormat::Preserve) mf = c10::MemoryFormat::Contiguous;
  if (self.is_contiguous(mf)) return self;
  // (A tensor subclass or a fake tensor, while tracing, gets PyTorch's decomposition, as on the device.)
  if (!channelsLast(mf) || self.unsafeGetTensorImpl()->is_python_dispatch()) return self.clone(mf);
  refuseUnlessFallback("aten::contiguous");
  if (at::GradMode::is_enabled() && self.requires_grad())
    return HostContiguous::apply(self, static_cast<int64_t>(mf));
  return hostContiguous(self, mf);
}

// _to_copy of a neuron tensor (copies from the CPU dispatch on the CPU): the
// composite kernel, except for an explicit channels-last format.
at::Tensor toCopy(const at::Tensor& self, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                  std::optional<at::Device> device, std::optional<bool> pin_memory, bool non_blocking,
                  std::optional<c10::MemoryFormat> memory_format) {
  if (!memory_format || !channelsLast(*memory_format))
    return at::native::_to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format);
  refuseUnlessFallback("aten::_to_copy");
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::_to_copy", "");
  return viaFallback(op, {self, dtype, layout, device, pin_memory, non_blocking, memory_format});
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("contiguous", contiguous);
  m.impl("_to_copy", toCopy);
}
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { m.impl("contiguous", contiguous); }

}  // namespace neuron_sim
