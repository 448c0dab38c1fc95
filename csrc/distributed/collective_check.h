// Before every collective the ranks exchange a small fixed-size record of
// what they are about to do (which collective, root, reduce op, dtypes and
// shapes). gloo given buffers of different sizes aborts the whole process
// from its own thread; comparing the records first turns every disagreement
// into the same clear error on every rank. Plain ATen, no c10d.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace neuron_sim::distributed {

// Slots per rank in the exchanged record (int64 each).
constexpr int kSignatureSlots = 48;

struct Signature {
  const char* op = "";              // the collective, as the user calls it ("all_reduce")
  int64_t root = -1;                // src/dst rank, or -1
  int64_t reduce_op = -1;           // c10d::ReduceOp::RedOpType, or -1
  std::vector<at::Tensor> tensors;  // the tensors whose dtype and shape every rank must share
  std::string local_error;          // this rank's arguments are invalid: raised here, named elsewhere
};

// This rank's record.
std::vector<int64_t> encodeSignature(const Signature& sig);

// Compares every rank's record (`all` holds world_size records back to back).
// Returns "" when they agree, else the error message every rank raises.
std::string compareSignatures(const Signature& mine, const int64_t* all, int world_size, int rank);

// torch's spelling of a dtype ("float32"), which users read, rather than c10's ("Float").
std::string dtypeName(c10::ScalarType t);

// "float32[4, 3]"
std::string describeTensor(const at::Tensor& t);

}  // namespace neuron_sim::distributed
