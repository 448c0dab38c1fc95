// The 64-bit rule of the real backend (docs/semantics.md): Trainium has no 64-bit
// arithmetic, so TorchNeuron computes a native op's float64 tensors in
// float32 and its int64 tensors in int32, and casts the results back.
// Storage keeps the dtype the user asked for; only the computation narrows.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>
#include <c10/util/SmallVector.h>

#include "aten/execution/op_table.h"

namespace neuron_sim {

enum class DtypePolicy { kTrainium, kExact };  // kExact: NEURON_SIM_DTYPE_POLICY=exact
void setDtypePolicy(DtypePolicy policy);
DtypePolicy dtypePolicy();

// The dtypes the rule is about: the device has no 64-bit arithmetic for them.
inline bool isWide(at::ScalarType s) { return s == at::kDouble || s == at::kLong; }
// The 32-bit dtype the device computes a wide one in (the rule's one table; Python
// reads it through _C._narrowed_dtypes(): execution/dtype_policy.py, nki, compile, testing).
inline at::ScalarType narrowedDtype(at::ScalarType s) {
  return s == at::kDouble ? at::kFloat : (s == at::kLong ? at::kInt : s);
}
// The 64-bit integer dtypes a compiled graph's inputs hold as int32 values on the
// device (wrapped through int32 at launch). The one list: the launch check reads
// it here, Python (execution/dtype_policy.py) through _C._wide_int_dtypes().
inline constexpr at::ScalarType kWideIntDtypes[] = {at::kLong, at::kUInt64};
inline bool isWideInt(at::ScalarType s) {
  for (const at::ScalarType w : kWideIntDtypes)
    if (s == w) return true;
  return false;
}
// The dtype the device computes a wide one in, under the current policy.
inline at::ScalarType computedDtype(at::ScalarType s) {
  if (!isWide(s) || dtypePolicy() != DtypePolicy::kTrainium) return s;  // the policy only for a wide one
  return narrowedDtype(s);
}

// What one call narrowed, so its results can be widened again.
struct Narrowed {
  bool f64 = false, i64 = false;
  // (host alias the caller passed, 32-bit stand-in the kernel saw) for the
  // arguments the op writes: the stand-in's result is copied back.
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 4> written;
  // Every argument the op writes: its results are never cast (out= keeps its dtype).
  c10::SmallVector<c10::TensorImpl*, 4> writes;
};

// Reads the op's schema facts the rule needs (OpEntry::written_args,
// dtype_arg_mask, may_downcast); called once, when the op's entry is made.
void readDtypeFacts(OpEntry& e, const c10::FunctionSchema& schema);

// Replaces the 64-bit tensors among a native op's arguments (host aliases
// on the stack, 0-dim tensors excepted) by 32-bit stand-ins. float64 really
// computes in float32; int64 stays int64 (CPU index kernels require it) but
// holds int32-wrapped values, which gives the same numbers as int32 math.
// Called only for a call the rule narrows (CallFacts::narrow: some argument
// is 64-bit, the policy is Trainium's).
void narrowArguments(OpEntry& e, torch::jit::Stack* stack, size_t first, size_t nargs, Narrowed& n);

// After the kernel (inside the arena scope): writes stand-ins back into the
// caller's tensors and widens the returned values again.
void widenResults(const Narrowed& n, torch::jit::Stack* stack, size_t nret);

// Casts to or from a 64-bit type that touch a neuron tensor run on the host
// (the device cannot convert them): copy.cpp counts them for the report.
void noteHostCast64();
uint64_t hostCasts64();
void clearHostCasts64();

}  // namespace neuron_sim
