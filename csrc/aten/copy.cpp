// Copies between host and device, between devices, and .item(). Arena memory
// is host memory, so a copy is the CPU copy kernel between aliases: it does
// dtype conversion, strides and broadcasting in one pass, at memcpy speed.
#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/copy.h>
#include <torch/library.h>

#include "neuron.h"

namespace neuron_sim {
namespace {

at::Tensor onHost(const at::Tensor& t) { return t.device().type() == kNeuron ? hostAlias(t) : t; }

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking*/) {
  TORCH_CHECK(self.device().type() == kNeuron || self.device().is_cpu(), "neuron: cannot copy from ", self.device(),
              " to ", dst.device(), "; move the tensor to the CPU first");
  TORCH_CHECK(dst.device().type() == kNeuron || dst.device().is_cpu(), "neuron: cannot copy from ", self.device(),
              " to ", dst.device(), "; move the tensor to the CPU first");
  // Kernels complete when launched, so non_blocking copies are complete too.
  onHost(dst).copy_(onHost(self));
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (!dst.sizes().equals(self.sizes())) dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

c10::Scalar local_scalar_dense(const at::Tensor& self) { return at::_local_scalar_dense(hostAlias(self)); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
}

}  // namespace neuron_sim
