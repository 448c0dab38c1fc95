// Copies between host and device, between devices, and .item(). Arena memory
// is host memory, so a copy is the CPU copy kernel between aliases: it does
// dtype conversion, strides and broadcasting in one pass, at memcpy speed.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "aten/kernels/copy.h"

#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/copy.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <chrono>

#include "aten/execution/adaptive_eager.h"
#include "aten/execution/device_events.h"
#include "aten/execution/dtype_policy.h"
#include "aten/execution/numerics.h"
#include "aten/execution/tensor_alias.h"
#include "aten/execution/op_table.h"
#include "aten/execution/report_measures.h"
#include "aten/neuron.h"
#include "runtime/host_access.h"

namespace neuron_sim {
namespace {

std::atomic<uint64_t> g_host_device_copies{0};
// While set (a test replaced torch_neuronx._C._nrt_copy_*), every copy between
// host and device is handed to it; its nested copy runs here with t_routing set.
std::atomic<CopyRouter> g_router{nullptr};
thread_local bool t_routing = false;

// The copy's bytes. A cast on the device into bf16/fp16/fp8 rounds as the
// device's numerics say (numerics.h: stochastically when switched on); a
// cast from the host ran on the CPU first and rounds as the CPU does.
void copyValues(const at::Tensor& self, const at::Tensor& dst) {
  if (C10_UNLIKELY(self.scalar_type() != dst.scalar_type()) && runtime::numerics::rules() != 0 &&
      self.device().type() == kNeuron && dst.device().type() == kNeuron &&
      castUnderNumerics(onHost(self), onHost(dst)))
    return;
  onHost(dst).copy_(onHost(self));
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking*/) {
  runtime::HostAccess access;  // NEURON_SIM_PROTECT: copies touch arena pages
  TORCH_CHECK(self.device().type() == kNeuron || self.device().is_cpu(), "neuron: cannot copy from ", self.device(),
              " to ", dst.device(), "; move the tensor to the CPU first");
  TORCH_CHECK(dst.device().type() == kNeuron || dst.device().is_cpu(), "neuron: cannot copy from ", self.device(),
              " to ", dst.device(), "; move the tensor to the CPU first");
  if (C10_UNLIKELY(runtime::adaptive::enabled()) && self.device().type() != dst.device().type()) {
    const bool read = self.device().type() == kNeuron;  // the host waits for the queued ops
    flushAdaptive((read ? self : dst).device().index(),
                  read ? runtime::adaptive::Flush::kHostRead : runtime::adaptive::Flush::kHostWrite);
  }
  CopyRouter router = g_router.load(std::memory_order_relaxed);
  if (C10_UNLIKELY(router != nullptr) && !t_routing) {
    if (self.device().type() != dst.device().type()) {
      t_routing = true;
      try {
        router(self, dst);
      } catch (...) {
        t_routing = false;
        throw;
      }
      t_routing = false;
      return dst;
    }
    // A device cast to or from float64/int64 bounces through the host (the
    // device cannot convert them): one read, the cast on the CPU, one write.
    if (self.scalar_type() != dst.scalar_type() && (isWide(self.scalar_type()) || isWide(dst.scalar_type()))) {
      at::Tensor host = at::empty(self.sizes(), self.options().device(at::kCPU));
      copy_from(self, host, false);
      copy_from(host.to(dst.scalar_type()), dst, false);
      noteHostCast64();  // the cast itself ran on the host, as below
      return dst;
    }
  }
  // The real backend's cast policy sends every cast to or from float64/int64
  // through the CPU (the device cannot convert them); arena bytes are host
  // memory, so here that is the same copy, counted (docs/semantics.md).
  if (self.scalar_type() != dst.scalar_type() && (isWide(self.scalar_type()) || isWide(dst.scalar_type())))
    noteHostCast64();
  if (self.device().is_cpu() != dst.device().is_cpu()) g_host_device_copies.fetch_add(1, std::memory_order_relaxed);
  // Kernels complete when launched, so non_blocking copies are complete too.
  const int64_t issued = C10_UNLIKELY(recordingEvents()) ? runtime::wallNowNs() : 0;
  if (C10_LIKELY(!reportActive())) {
    copyValues(self, dst);
  } else {
    const auto start = std::chrono::steady_clock::now();
    copyValues(self, dst);
    if (self.device().type() != dst.device().type())  // host<->device, for the migration report
      noteHostCopy(dst.numel() * dst.element_size(),
                   std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
                       .count());
  }
  if (C10_UNLIKELY(issued)) recordCopy(self, dst, issued);
  return dst;
}

// copy_ between two neuron tensors is an op of the device (it records
// "aten::copy_": circular padding's copies into slices of its output show it);
// to or from the host it is a transfer, recorded by no op. PyTorch's own
// copy_ does the rest (through _copy_from above).
at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  if (self.device().type() == kNeuron && src.device().type() == kNeuron) {
    static OpEntry& tracked = kernelEntry("aten::copy_", "");
    recordKernelRun(tracked);
  }
  return at::native::copy_(self, src, non_blocking);
}

// As the device's C++ kernel (the CPU fallback uses it to write results into
// out= arguments): only host to device, and only into an empty or same-size
// destination - the device does not resize a wrongly sized out= tensor.
at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  TORCH_CHECK(self.device().is_cpu() && dst.device().type() == kNeuron,
              "_copy_from_and_resize now only support copy from cpu tensor to neuron tensor, but got src tensor "
              "device is ", self.device(), " and dst device is ", dst.device());
  if (dst.numel() == 0) {
    dst.resize_(self.sizes());
  } else {
    TORCH_CHECK(dst.sizes().equals(self.sizes()),
                "_copy_from_and_resize now only support copy with same size, or dst.numel() == 0!");
  }
  return copy_from(self, dst, false);
}

// A C++ kernel of the device (recorded as "aten::clone"): a contiguous copy
// unless channels_last / channels_last_3d is asked for, which it writes in
// that layout; preserve_format gives a contiguous copy too.
at::Tensor clone(const at::Tensor& self, std::optional<c10::MemoryFormat> memory_format) {
  static OpEntry& tracked = kernelEntry("aten::clone", "");
  recordKernelRun(tracked);
  auto mf = memory_format.value_or(c10::MemoryFormat::Preserve);
  if (mf == c10::MemoryFormat::Preserve) mf = c10::MemoryFormat::Contiguous;
  at::Tensor out = at::empty(self.sizes(), self.options().memory_format(mf));
  return copy_from(self, out, false);
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  static OpEntry& tracked = kernelEntry("aten::_local_scalar_dense", "");
  recordKernelRun(tracked);
  runtime::HostAccess access;
  flushPoint(self.device().index(), runtime::adaptive::Flush::kHostRead);  // .item() waits for the queued ops
  if (C10_UNLIKELY(recordingEvents())) recordScalarRead(self, runtime::wallNowNs());
  if (C10_UNLIKELY(reportActive())) noteHostCopy(self.element_size(), 0);  // .item(): one value to the host
  return at::_local_scalar_dense(hostAlias(self));
}

}  // namespace

uint64_t hostDeviceCopies() { return g_host_device_copies.load(std::memory_order_relaxed); }
void countHostDeviceCopies(uint64_t n) { g_host_device_copies.fetch_add(n, std::memory_order_relaxed); }
bool copyRouted() { return g_router.load(std::memory_order_relaxed) != nullptr; }
void setCopyRouter(CopyRouter router) { g_router.store(router); }

// A copy from a conjugate or negative view must not be resolved by PyTorch's
// Conjugate/Negative fallbacks: resolving one is itself a copy (resolve_conj
// -> conj_physical -> CPU fallback -> copy to the host -> _copy_from), which
// would recurse until the stack overflows. The host aliases carry the bits,
// so the CPU copy kernel conjugates and negates as it copies.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", copy_from);
  m.impl("copy_", copy_);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("clone", clone);
}

}  // namespace neuron_sim
