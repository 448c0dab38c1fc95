// The device's placement checks of a native call (placement.h).
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "aten/execution/placement.h"

#include <ATen/MemoryOverlap.h>

#include <algorithm>
#include <string>

#include "aten/device/generator.h"
#include "aten/execution/fallback_policy.h"

namespace neuron_sim {
namespace {

std::string deviceName(const at::Tensor& t) { return c10::DeviceTypeName(t.device().type(), /*lower_case=*/true); }

// A tensor input of a native op that is not on neuron and not 0-dim: the
// device's message (its Python ops check this before anything else).
[[noreturn]] void foreignInput(const c10::OperatorHandle& op, const OpEntry& e, const torch::jit::Stack& stack,
                               const CallFacts& facts) {
  const auto& schema = op.schema();
  const size_t first = stack.size() - schema.arguments().size();
  const size_t i = static_cast<size_t>(facts.misplaced_arg);
  const int64_t j = facts.misplaced_elem;
  const c10::IValue& v = stack[first + i];
  const at::Tensor t = j < 0 ? v.toTensor() : v.toListRef()[j].toTensor();
  if (e.inputs.load(std::memory_order_relaxed) == InputCheck::kIterator) {
    // TensorIterator names the first device it saw and the one that differs.
    c10::Device other = t.device();
    bool neuron_first = false;
    for (size_t k = 0; k < i; ++k) {
      const c10::IValue& w = stack[first + k];
      if (w.isTensor() && onNeuron(w.toTensor())) { other = w.toTensor().device(); neuron_first = true; break; }
    }
    if (!neuron_first) other = neuronDevice(facts.device);
    const c10::Device a = neuron_first ? other : t.device(), b = neuron_first ? t.device() : other;
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", a, " and ",
                b, "!");
  }
  const auto& arg = schema.arguments()[i];
  if (arg.kwarg_only())  // the device's wording, without the space
    TORCH_CHECK(false, "Non-scalar tensor kwarg '", arg.name(), "' is on ", deviceName(t), "device, expected neuron");
  if (j >= 0) TORCH_CHECK(false, "Non-scalar tensor arg", i, "[", j, "] is on ", deviceName(t), " device, expected neuron");
  TORCH_CHECK(false, "Non-scalar tensor arg", i, " is on ", deviceName(t), " device, expected neuron");
}

}  // namespace

// A CPU op reaches this kernel when only its generator is a neuron one (the
// generator's dispatch key joins the op's key set): refuse it, as cuda does.
void checkGeneratorPlacement(const c10::OperatorHandle& op, const CallFacts& facts) {
  TORCH_CHECK(facts.on_neuron || facts.neuron_device_arg, "Expected a 'cpu' device type for generator but found "
              "'neuron' (", op.schema().name(), " runs on the CPU here; pass a CPU generator, or create the tensor "
              "on neuron)");
}

// How many random numbers a call draws, read from its arguments before it
// runs: the largest tensor, or the largest size list (`randn(size)`), or else
// its first integer (`randperm(n)`). One per element; the offset advances by it.
uint64_t numbersDrawn(const torch::jit::Stack& stack, size_t first) {
  int64_t most = 0, first_int = 0;
  for (size_t i = first; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      if (v.toTensor().defined()) most = std::max(most, v.toTensor().numel());
    } else if (v.isIntList()) {
      int64_t n = 1;
      for (int64_t d : v.toIntList()) n *= std::max<int64_t>(d, 0);
      most = std::max(most, n);
    } else if (v.isInt() && first_int == 0) {
      first_int = v.toInt();
    }
  }
  return static_cast<uint64_t>(std::max<int64_t>(most > 0 ? most : first_int, 1));
}

// Random ops that run on the device draw from its generator, never from the
// CPU stream (NEURON_SIM_RNG=cpu: the CPU kernel draws from the CPU default
// generator).
void useDeviceGenerators(const OpEntry& e, torch::jit::Stack* stack, size_t first, int device) {
  if (e.generator_args.empty() || !deviceRngStream()) return;
  const uint64_t numbers = numbersDrawn(*stack, first);
  for (size_t i : e.generator_args) {
    c10::IValue& v = (*stack)[first + i];
    const at::Generator& g = v.isNone() ? defaultGenerator(static_cast<c10::DeviceIndex>(device)) : v.toGenerator();
    v = hostGeneratorOf(g, numbers);
  }
}

// The device checks a native op's tensor inputs before running it, as the
// walk found them: all on neuron (0-dim CPU tensors aside) and on one
// NeuronCore. Returns false when the op's rule sends such a call to the CPU
// fallback instead.
bool checkInputs(const c10::OperatorHandle& op, const OpEntry& e, const torch::jit::Stack& stack, const CallFacts& facts) {
  switch (facts.placement) {
    case Placement::kOk:
      return true;
    case Placement::kTwoCores:
      TORCH_CHECK(false, "Inconsistent device IDs found in kernel inputs: expected device ", facts.first_core,
                  " but found device ", facts.other_core);
    case Placement::kForeign:
      if (e.inputs.load(std::memory_order_relaxed) == InputCheck::kFallback) return false;
      foreignInput(op, e, stack, facts);
  }
  return true;
}

bool writesContiguously(const c10::OperatorHandle& op, const OpEntry& e, const torch::jit::Stack& stack) {
  const at::Tensor& self = stack[stack.size() - op.schema().arguments().size()].toTensor();
  if (!self.defined() || self.is_contiguous() || at::has_internal_overlap(self) == at::MemOverlap::Yes) return true;
  if (fallbackOnlyForUnimplemented())
    raiseImplementationError(e.name, e.base == "aten::add_" ? "Cannot add non-contiguous tensor"
                                                            : "Cannot process non-contiguous tensor");
  return false;
}

}  // namespace neuron_sim
