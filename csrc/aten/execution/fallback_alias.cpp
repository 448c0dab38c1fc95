// A fallback op's inputs read in place. cpu_fallback copies every neuron
// input to the host before the CPU kernel runs; for an op that only reads
// them, a host alias of the same arena bytes gives the kernel the same
// values without the copy (for a small op the copies cost more than the
// kernel). What the fallback shows stays: the op is tracked as a fallback
// by the caller, the copies it stands for are counted (count_cpu_bounce_calls),
// and its results are copied to the device as cpu_fallback copies them.
// Whenever something observes copies one by one, the call takes cpu_fallback.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "aten/execution/fallback_alias.h"

#include <ATen/record_function.h>

#include "aten/execution/device_events.h"
#include "aten/execution/report_measures.h"
#include "aten/execution/tensor_alias.h"
#include "aten/kernels/copy.h"
#include "aten/neuron.h"
#include "runtime/adaptive_eager.h"

namespace neuron_sim {
namespace {

// Only reads its arguments and returns fresh tensors: no argument is written
// (in place, out=) and no result aliases one (a view). Read from the schema once per op.
bool readsOnly(const c10::FunctionSchema& schema) {
  for (const auto& a : schema.arguments())
    if (a.alias_info() != nullptr || a.type()->kind() == c10::TypeKind::DeviceObjType) return false;
  for (const auto& r : schema.returns())
    if (r.alias_info() != nullptr) return false;
  return true;
}

// Something sees each copy of the fallback (its events, its time, its bytes).
bool copiesObserved() {
  return copyRouted() || reportActive() || recordingEvents() || runtime::adaptive::enabled() || at::hasCallbacks();
}

// A neuron tensor whose host copy would be this very tensor over fresh bytes:
// dense and non-overlapping (a copy keeps those strides; a strided slice's
// copy is compacted, so a kernel could lay its result out differently), and
// no lazy conjugate or negative bit (a copy resolves it).
bool copyIsAlias(const at::Tensor& t) {
  return !t.defined() || t.device().type() != kNeuron ||
         (t.is_non_overlapping_and_dense() && !t.is_conj() && !t.is_neg());
}

bool argumentsReadInPlace(const torch::jit::Stack& stack, size_t first) {
  for (size_t i = first; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor() && !copyIsAlias(v.toTensor())) return false;
    if (v.isList())
      for (const c10::IValue& e : v.toListRef())
        if (e.isTensor() && !copyIsAlias(e.toTensor())) return false;
  }
  return true;
}

// The argument as the CPU kernel gets it; counts the neuron tensors it stands in for.
c10::IValue onHostCounted(const c10::IValue& v, uint64_t& copies) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || t.device().type() != kNeuron) return v;
    ++copies;
    return hostAlias(t);
  }
  if (v.isList()) {
    bool any = false;
    for (const c10::IValue& e : v.toListRef()) any |= e.isTensor() && e.toTensor().device().type() == kNeuron;
    if (!any) return v;
    c10::List<c10::IValue> copy = v.toList().copy();
    for (size_t i = 0; i < copy.size(); ++i) copy.set(i, onHostCounted(copy.get(i), copies));
    return copy;
  }
  return v;
}

}  // namespace

bool fallbackReadingInPlace(const c10::OperatorHandle& op, torch::jit::Stack* stack, int device) {
  if (device < 0 || copiesObserved()) return false;
  if (!readsOnly(op.schema())) return false;
  const size_t nargs = op.schema().arguments().size();
  const size_t first = stack->size() - nargs;
  if (!argumentsReadInPlace(*stack, first)) return false;
  uint64_t copies = 0;
  for (size_t i = first; i < stack->size(); ++i) (*stack)[i] = onHostCounted((*stack)[i], copies);
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  countHostDeviceCopies(copies);
  // The results, copied to the device as cpu_fallback copies them (counted there).
  const c10::Device target = neuronDevice(device);
  const size_t nret = op.schema().returns().size();
  for (size_t i = stack->size() - nret; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      if (v.toTensor().defined()) v = v.toTensor().to(target);
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      for (size_t j = 0; j < list.size(); ++j) {
        at::Tensor t = list.get(j);
        if (t.defined()) list.set(j, t.to(target));
      }
    }
  }
  return true;
}

}  // namespace neuron_sim
