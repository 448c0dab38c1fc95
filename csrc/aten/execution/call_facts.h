// What the op path needs to know about one call, read from its arguments in
// one walk: the device it runs on, whether its tensors are where a native op
// needs them, whether it takes complex or 64-bit values, the dtypes its CPU
// kernel will see and its compile-cache signature. The boxed kernel
// (execution.cpp) walks its stack, the unboxed fast path (fast_path.cpp) its
// typed arguments, both through FactWalk's adders: one set of rules decides
// each fact, and every later step of the call reads the struct instead of
// scanning the arguments again.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Scalar.h>
#include <c10/util/OptionalArrayRef.h>

#include <climits>
#include <cstdint>
#include <optional>

#include "aten/execution/compile_cache.h"
#include "aten/execution/dtype_policy.h"
#include "aten/execution/op_table.h"
#include "aten/neuron.h"

namespace neuron_sim {

// Where a native op's tensors are, against its input check (InputCheck):
// the first problem met, in argument order.
enum class Placement : uint8_t {
  kOk,        // on one NeuronCore (0-dim tensors elsewhere aside)
  kForeign,   // a tensor neither on neuron nor 0-dim (misplaced_arg, misplaced_elem)
  kTwoCores,  // neuron tensors on two NeuronCores (first_core, other_core)
};

struct CallFacts {
  int device = -1;  // where the op runs: its first neuron tensor or neuron device argument, else the current device
  bool on_neuron = false;  // some tensor argument is a neuron tensor
  bool neuron_device_arg = false;  // a device= argument names neuron
  // cpu_fallback puts outputs on the first tensor argument's device; when
  // that one is on the CPU (`3 - x` runs sub(wrapped 3, x)) the outputs
  // belong on this core, the first neuron tensor argument's (-1: no such case).
  int host_target = -1;
  Placement placement = Placement::kOk;
  int first_core = -1, other_core = -1;
  int misplaced_arg = -1, misplaced_elem = -1;  // elem -1: the argument itself, not a list element
  bool complex = false;  // a complex tensor: the device computes in no complex dtype
  bool wide = false;     // a 64-bit tensor that is not 0-dim, or a 64-bit dtype= argument
  bool narrow = false;   // the 64-bit rule narrows this call (dtype_policy.h)
  uint64_t dtype_bits = 0;  // the dtypes the CPU kernel sees (after the 64-bit rule), one bit per ScalarType
  uint64_t signature = 0;   // the eager compile cache's key (compile_cache.h)
};

inline uint64_t dtypeBit(at::ScalarType s) {
  const int i = static_cast<int>(s);
  return i >= 0 && i < 64 ? uint64_t{1} << i : 0;
}

// One walk over a call's arguments, in order. `native`: the op runs on the
// device, so its placement, dtypes and signature matter too (a fallback
// needs only the device and the complex/64-bit facts).
class FactWalk {
 public:
  C10_ALWAYS_INLINE FactWalk(const OpEntry& e, bool native)
      : e_(e), native_(native), checked_(e.inputs.load(std::memory_order_relaxed) == InputCheck::kSelf ? 1 : INT_MAX),
        sig_(native ? signatureStart(e) : 0) {}

  C10_ALWAYS_INLINE void tensor(const at::Tensor& t, int arg, int elem = -1) {
    if (!t.defined()) {
      if (native_) sig_ = signatureUndefined(sig_);
      return;
    }
    const at::ScalarType s = t.scalar_type();
    const bool neuron = t.device().type() == kNeuron;
    if (neuron) {
      const int core = t.device().index();
      if (f_.device < 0) f_.device = core;
      if (!f_.on_neuron) first_core_ = core;
      f_.on_neuron = true;
      if (core != first_core_ && arg < checked_) problem(Placement::kTwoCores, arg, elem, core);
    } else if (t.dim() != 0 && arg < checked_) {
      problem(Placement::kForeign, arg, elem, -1);
    }
    if (C10_UNLIKELY(at::isComplexType(s))) f_.complex = true;
    const bool wide = isWide(s) && t.dim() != 0;  // 0-dim tensors (Python scalars) keep their width
    f_.wide |= wide;
    if (native_) {
      (wide ? wide_bits_ : f_.dtype_bits) |= dtypeBit(s);
      sig_ = signatureTensor(sig_, t);
    }
  }
  void integer(int64_t v, int arg) {
    if (C10_UNLIKELY(arg < 64 && (e_.dtype_arg_mask >> arg) & 1)) {  // a dtype= argument
      const auto s = static_cast<at::ScalarType>(v);
      f_.wide |= isWide(s);
      if (native_) (isWide(s) ? wide_bits_ : f_.dtype_bits) |= dtypeBit(s);
    }
    if (native_) sig_ = signatureInt(sig_, v);
  }
  void boolean(bool b) {
    if (native_) sig_ = signatureBool(sig_, b);
  }
  void none() {
    if (native_) sig_ = signatureNone(sig_);
  }
  void device(const c10::Device& d) {
    if (d.type() != kNeuron) return;
    f_.neuron_device_arg = true;
    if (f_.device < 0 && d.has_index()) f_.device = d.index();
  }
  void scalar(const c10::Scalar& s, int arg) {  // as the Scalar's IValue would be walked
    if (s.isBoolean()) boolean(s.toBool());
    else if (s.isIntegral(/*includeBool=*/false)) integer(s.toLong(), arg);
  }
  void ints(c10::IntArrayRef v) {
    if (native_)
      for (int64_t x : v) sig_ = signatureInt(sig_, x);
  }
  void value(const c10::IValue& v, int arg);  // any boxed argument

  // Typed arguments of the unboxed fast path.
  void add(const at::Tensor& t, int arg) { tensor(t, arg); }
  void add(const std::optional<at::Tensor>& t, int arg) { t ? tensor(*t, arg) : none(); }  // as its IValue
  void add(const c10::Scalar& s, int arg) { scalar(s, arg); }
  void add(int64_t v, int arg) { integer(v, arg); }
  void add(bool b, int) { boolean(b); }
  void add(at::ScalarType s, int arg) { integer(static_cast<int64_t>(s), arg); }
  void add(const std::optional<at::ScalarType>& s, int arg) { s ? add(*s, arg) : none(); }
  void add(c10::OptionalIntArrayRef v, int) { v ? ints(*v) : none(); }
  void add(c10::string_view, int) {}  // strings shape no graph

  CallFacts finish();

 private:
  void problem(Placement p, int arg, int elem, int core) {
    if (f_.placement != Placement::kOk) return;
    f_.placement = p;
    f_.misplaced_arg = arg;
    f_.misplaced_elem = elem;
    f_.first_core = first_core_;
    f_.other_core = core;
  }

  const OpEntry& e_;
  bool native_;
  int checked_;  // arguments the input check looks at
  int first_core_ = -1;
  int first_tensor_ = 0;     // the first tensor argument: 0 none yet, 1 on the CPU, 2 elsewhere or undefined
  int first_top_core_ = -1;  // the first neuron tensor argument's core (lists aside)
  uint64_t wide_bits_ = 0;  // dtypes of the 64-bit values, before the rule narrows them
  uint64_t sig_;
  CallFacts f_;
};

// The facts of the call whose `nargs` arguments are at the top of `stack`.
CallFacts callFacts(const OpEntry& e, bool native, const torch::jit::Stack& stack, size_t nargs);

}  // namespace neuron_sim
