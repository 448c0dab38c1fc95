#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "aten/execution/call_facts.h"

#include "aten/device/guard.h"

namespace neuron_sim {

void FactWalk::value(const c10::IValue& v, int arg) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (first_tensor_ == 0) first_tensor_ = t.defined() && t.device().is_cpu() ? 1 : 2;
    if (first_top_core_ < 0 && t.defined() && t.device().type() == kNeuron) first_top_core_ = t.device().index();
    tensor(t, arg);
  } else if (v.isInt()) {
    integer(v.toInt(), arg);
  } else if (v.isBool()) {
    boolean(v.toBool());
  } else if (v.isNone()) {
    none();
  } else if (v.isDevice()) {
    device(v.toDevice());
  } else if (v.isList()) {
    const auto list = v.toListRef();
    for (size_t j = 0; j < list.size(); ++j) {
      const c10::IValue& x = list[j];
      if (x.isTensor()) tensor(x.toTensor(), arg, static_cast<int>(j));
      else if (x.isInt() && native_) sig_ = signatureInt(sig_, x.toInt());  // sizes and dims, never a dtype
    }
  }
}

CallFacts FactWalk::finish() {
  if (f_.device < 0) f_.device = currentDeviceIndex();  // a factory op with no device argument
  if (first_tensor_ == 1) f_.host_target = first_top_core_;
  f_.narrow = f_.wide && e_.may_downcast && dtypePolicy() == DtypePolicy::kTrainium;
  if (native_) {
    // The 64-bit rule hands the kernel float32 for float64 values; int64 keeps its dtype.
    const uint64_t f64 = dtypeBit(at::kDouble);
    f_.dtype_bits |= f_.narrow && (wide_bits_ & f64) ? (wide_bits_ & ~f64) | dtypeBit(at::kFloat) : wide_bits_;
    f_.signature = sig_;
  }
  return f_;
}

CallFacts callFacts(const OpEntry& e, bool native, const torch::jit::Stack& stack, size_t nargs) {
  FactWalk walk(e, native);
  const size_t first = stack.size() - nargs;
  for (size_t i = 0; i < nargs; ++i) walk.value(stack[first + i], static_cast<int>(i));
  return walk.finish();
}

}  // namespace neuron_sim
