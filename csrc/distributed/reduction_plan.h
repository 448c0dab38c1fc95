// How a reduction runs on gloo. gloo reduces float32/64, float16, bfloat16,
// int8/32/64, uint8 and bool itself, with SUM, PRODUCT, MIN, MAX, BAND, BOR,
// BXOR. The rest is composed around it: AVG is SUM then a division, PREMUL_SUM
// a multiplication then SUM; int16 is reduced in int32 and float8 in float32
// (narrowed back exactly), complex tensors as pairs of reals.
#pragma once
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <optional>
#include <string>

#include "distributed/collective_staging.h"

namespace neuron_sim::distributed {

struct Reduction {
  c10d::ReduceOp gloo_op;  // the op gloo runs
  bool average = false;    // AVG = SUM, then divide by the group size
  bool premul = false;     // PREMUL_SUM = multiply by a factor, then SUM
  double factor = 1.0;
  // The device's numerics (aten/execution/numerics.h): a sum of integers runs
  // in fp32, a bf16/fp16 sum in fp32 rounded stochastically when switched on.
  bool in_float = false;
};

// The dtype a reduction of `s` runs in, or nullopt when it cannot be reduced.
std::optional<at::ScalarType> reduceDtype(at::ScalarType s);

// Validates `op` for `dtype` ("" when fine, else why not) and fills `r`.
std::string planReduction(const c10d::ReduceOp& op, at::ScalarType dtype, Reduction& r);

// A host buffer gloo reduces in place for device tensor `t`: its alias when
// gloo can take it as it is, else a staging tensor. `copy_in`: starts as `t`.
// `op` names the collective (a result that reached 2^24 is noted under it).
at::Tensor reducible(const at::Tensor& t, const Reduction& r, Staging& s, bool copy_in, bool write_back,
                     const char* op);

// Divides `buf` by the group size first among the finishing steps: a narrower
// dtype copied back would wrap before dividing.
void averageFirst(const at::Tensor& buf, int size, Staging& s);

// AVG's division in place (integer dtypes: truncating, as torch's div).
void divideBy(at::Tensor& t, int size);

inline int64_t reduceCode(const c10d::ReduceOp& op) { return static_cast<int64_t>(op.op_); }

}  // namespace neuron_sim::distributed
