// The device's numerics where a native kernel writes its output
// (docs/numerics.md; the switches and the rounding are runtime/numerics.h):
//   stochastic rounding - bf16/fp16 results computed in fp32 and rounded
//                         stochastically (NEURON_RT_STOCHASTIC_ROUNDING_EN=1);
//   auto-cast           - fp32 matmuls (or every fp32 op) computed on inputs
//                         rounded to the --auto-cast-type (NEURON_CC_FLAGS);
//   integers            - integer matmuls, scatter-add and index-add computed
//                         in fp32 (exact below 2^24), under the device's dtype
//                         policy (off with NEURON_SIM_DTYPE_POLICY=exact).
// Off, the op path pays one branch: numericsApply.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "aten/execution/op_table.h"
#include "runtime/numerics.h"

namespace neuron_sim {

// Whether a call of `e` in the dtypes `dtype_bits` (CallFacts) may compute
// under a rule: some rule is on, or the op computes integers in fp32 and the
// call has integers. One relaxed load and a mask test.
inline bool numericsApply(const OpEntry& e, uint64_t dtype_bits) {
  return (runtime::numerics::rules() | (e.integer_math & dtype_bits)) != 0;
}

// Sets OpEntry::integer_math from the op's name; called once, when the op's entry is made.
void readNumericsFacts(OpEntry& e);

// Runs the kernel of a native op (its host kernel, or the CPU kernel through
// runCpuKernel) on the host aliases at the top of `stack`, under the rules
// that apply to the call. Reads the environment at the first op: a malformed
// NEURON_CC_FLAGS or seed raises here, and the next op reads it again.
void runUnderNumerics(const c10::OperatorHandle& op, OpEntry& e, torch::jit::Stack* stack, uint64_t dtype_bits);

// A device-to-device cast into bf16/fp16/fp8 under stochastic rounding:
// writes `dst` (host alias) from `src` (host alias) and returns true; false
// when no rule applies (the caller copies as usual).
bool castUnderNumerics(const at::Tensor& src, const at::Tensor& dst);

// Stores a reduction's fp32 result into `dst` (a collective's result, in its
// own dtype): stochastically rounded for bf16/fp16 under stochastic rounding,
// else cast; an integer result that reached 2^24 is noted under `op`.
void storeReduced(const at::Tensor& wide, const at::Tensor& dst, const char* op);
// Whether a reduction (sum) of `dtype` runs in fp32 under the rules: integer
// dtypes under the dtype policy, bf16/fp16 under stochastic rounding.
bool reducesInFloat(at::ScalarType dtype);

// The rules in effect, reading the environment if no op has yet (raising as the first op would).
runtime::numerics::Settings numericsSettings();

// Integer ops whose inputs or result reached 2^24 (they would round on
// Trainium): op name -> calls. While a migration report is active each is
// also passed to the reporter (Python, which records the user's source line).
std::vector<std::pair<std::string, uint64_t>> roundingHits();
void clearRoundingHits();
void setRoundingReporter(void (*report)(const std::string&));
// Notes one such op (the collectives call it for theirs).
void noteRounding(const std::string& op);

}  // namespace neuron_sim
