// Copies between host and device, between devices, and .item(). Arena memory
// is host memory, so a copy is the CPU copy kernel between aliases: it does
// dtype conversion, strides and broadcasting in one pass, at memcpy speed.
#include "aten/kernels/copy.h"

#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/copy.h>
#include <torch/library.h>

#include "aten/execution/dtype_policy.h"
#include "aten/execution/tensor_alias.h"
#include "aten/neuron.h"
#include "profiler/record.h"
#include "runtime/host_access.h"

namespace neuron_sim {
namespace {

std::atomic<uint64_t> g_host_device_copies{0};

bool is64(at::ScalarType s) { return s == at::kDouble || s == at::kLong; }

at::Tensor onHost(const at::Tensor& t) { return t.device().type() == kNeuron ? hostAlias(t) : t; }

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking*/) {
  runtime::HostAccess access;  // NEURON_SIM_PROTECT: copies touch arena pages
  TORCH_CHECK(self.device().type() == kNeuron || self.device().is_cpu(), "neuron: cannot copy from ", self.device(),
              " to ", dst.device(), "; move the tensor to the CPU first");
  TORCH_CHECK(dst.device().type() == kNeuron || dst.device().is_cpu(), "neuron: cannot copy from ", self.device(),
              " to ", dst.device(), "; move the tensor to the CPU first");
  // The real backend's cast policy sends every cast to or from float64/int64
  // through the CPU (the device cannot convert them); arena bytes are host
  // memory, so here that is the same copy, counted (docs/semantics.md).
  if (self.scalar_type() != dst.scalar_type() && (is64(self.scalar_type()) || is64(dst.scalar_type())))
    noteHostCast64();
  if (self.device().is_cpu() != dst.device().is_cpu()) g_host_device_copies.fetch_add(1, std::memory_order_relaxed);
  // Kernels complete when launched, so non_blocking copies are complete too.
  const int64_t issued = C10_UNLIKELY(profiler::recording()) ? runtime::wallNowNs() : 0;
  onHost(dst).copy_(onHost(self));
  if (C10_UNLIKELY(issued)) profiler::recordCopy(self, dst, issued);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (!dst.sizes().equals(self.sizes())) dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  runtime::HostAccess access;
  if (C10_UNLIKELY(profiler::recording())) profiler::recordScalarRead(self, runtime::wallNowNs());
  return at::_local_scalar_dense(hostAlias(self));
}

}  // namespace

uint64_t hostDeviceCopies() { return g_host_device_copies.load(std::memory_order_relaxed); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
}

}  // namespace neuron_sim
