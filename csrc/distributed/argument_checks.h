// What each collective accepts, declared as a short chain of checks:
//
//   sig.local_error = ArgCheck(world).onDevice(inputs).one(inputs, "reduce takes exactly one tensor")
//                         .reduction(opts.reduceOp, inputs, r).error();
//
// The first failing check keeps its message; the later ones do nothing, so
// they may name tensors that an earlier check found missing (first() stands
// in an undefined tensor). The message travels in the agreement record: this
// rank raises it, the others name this rank (collective_check.h).
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "distributed/reduction_plan.h"

namespace neuron_sim::distributed {

// The first tensor (list) of a list, or an undefined one (an empty list).
const at::Tensor& first(const std::vector<at::Tensor>& ts);
const std::vector<at::Tensor>& first(const std::vector<std::vector<at::Tensor>>& lists);

class ArgCheck {
 public:
  explicit ArgCheck(int world_size) : world_(world_size) {}

  // Defined, dense neuron tensors; a CPU tensor gets the fix named.
  ArgCheck& onDevice(const std::vector<at::Tensor>& ts);
  // `ok` must hold, else `why`.
  ArgCheck& expect(bool ok, const char* why);
  // Exactly one tensor.
  ArgCheck& one(const std::vector<at::Tensor>& ts, const char* why) { return expect(ts.size() == 1, why); }
  // A list of one tensor per rank: "the output list has 3 tensors; the group has 2 ranks".
  ArgCheck& perRank(size_t n, const char* list);
  // Every tensor of `ts` has `ref`'s dtype and shape: "output 1 is X but the input is Y".
  ArgCheck& like(const std::vector<at::Tensor>& ts, const at::Tensor& ref, const char* role, const char* ref_role);
  // `whole` holds world_size times `part`, of the same dtype (all-gather's output, reduce-scatter's input).
  ArgCheck& worldTimes(const std::vector<at::Tensor>& whole, const std::vector<at::Tensor>& part,
                       const char* whole_role, const char* part_role);
  // One dtype across a coalesced list.
  ArgCheck& sameDtype(const std::vector<at::Tensor>& ts, const char* collective);
  // `op` can reduce `ts`' dtype; fills `r` with how.
  ArgCheck& reduction(const c10d::ReduceOp& op, const std::vector<at::Tensor>& ts, Reduction& r);

  // A check of its own: keeps `why` unless an earlier check failed.
  ArgCheck& fail(std::string why);

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

 private:
  bool failed() const { return !error_.empty(); }
  int world_;
  std::string error_;
};

}  // namespace neuron_sim::distributed
