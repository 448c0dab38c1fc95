#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/argument_checks.h"

#include "aten/neuron.h"
#include "distributed/collective_check.h"

namespace neuron_sim::distributed {

const at::Tensor& first(const std::vector<at::Tensor>& ts) {
  static const at::Tensor none;
  return ts.empty() ? none : ts[0];
}

const std::vector<at::Tensor>& first(const std::vector<std::vector<at::Tensor>>& lists) {
  static const std::vector<at::Tensor> none;
  return lists.empty() ? none : lists[0];
}

ArgCheck& ArgCheck::onDevice(const std::vector<at::Tensor>& ts) {
  for (const auto& t : ts) {
    if (failed()) break;
    if (!t.defined())
      error_ = "got an undefined tensor";
    else if (t.device().type() != kNeuron)
      error_ = "got a tensor on " + t.device().str() +
               "; a 'neuron' process group runs collectives on neuron tensors. Move it with tensor.to('neuron'), "
               "or create the group with init_process_group('cpu:gloo,neuron:neuron') so CPU tensors use gloo";
    else if (t.is_sparse())
      error_ = "sparse tensors are not supported by the neuron backend";
  }
  return *this;
}

ArgCheck& ArgCheck::expect(bool ok, const char* why) {
  if (!failed() && !ok) error_ = why;
  return *this;
}

ArgCheck& ArgCheck::fail(std::string why) {
  if (!failed()) error_ = std::move(why);
  return *this;
}

ArgCheck& ArgCheck::perRank(size_t n, const char* list) {
  if (!failed() && static_cast<int>(n) != world_)
    error_ = std::string("the ") + list + " list has " + std::to_string(n) + " tensors; the group has " +
             std::to_string(world_) + " ranks";
  return *this;
}

ArgCheck& ArgCheck::like(const std::vector<at::Tensor>& ts, const at::Tensor& ref, const char* role,
                         const char* ref_role) {
  for (size_t i = 0; !failed() && i < ts.size(); ++i)
    if (ts[i].sizes() != ref.sizes() || ts[i].scalar_type() != ref.scalar_type())
      error_ = std::string(role) + " " + std::to_string(i) + " is " + describeTensor(ts[i]) + " but the " + ref_role +
               " is " + describeTensor(ref);
  return *this;
}

ArgCheck& ArgCheck::worldTimes(const std::vector<at::Tensor>& whole, const std::vector<at::Tensor>& part,
                               const char* whole_role, const char* part_role) {
  if (!failed() && (whole.empty() || whole.size() != part.size()))
    error_ = std::string("needs one ") + whole_role + " per " + part_role;
  for (size_t i = 0; !failed() && i < whole.size(); ++i)
    if (whole[i].numel() != part[i].numel() * world_ || whole[i].scalar_type() != part[i].scalar_type())
      error_ = std::string("the ") + whole_role + " must hold world_size (" + std::to_string(world_) +
               ") times the " + part_role + ", of the same dtype: " + whole_role + " " + describeTensor(whole[i]) +
               ", " + part_role + " " + describeTensor(part[i]);
  return *this;
}

ArgCheck& ArgCheck::sameDtype(const std::vector<at::Tensor>& ts, const char* collective) {
  for (size_t i = 0; !failed() && i < ts.size(); ++i)
    if (ts[i].scalar_type() != ts[0].scalar_type())
      error_ = std::string("all tensors of a coalesced ") + collective + " must have the same dtype, got " +
               describeTensor(ts[0]) + " and " + describeTensor(ts[i]);
  return *this;
}

ArgCheck& ArgCheck::reduction(const c10d::ReduceOp& op, const std::vector<at::Tensor>& ts, Reduction& r) {
  expect(!ts.empty(), "no tensors given");
  if (!failed()) error_ = planReduction(op, ts[0].scalar_type(), r);
  return *this;
}

}  // namespace neuron_sim::distributed
