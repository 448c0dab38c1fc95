// Allocation kernels: every neuron tensor is born here, in its device's arena.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "aten/device/guard.h"
#include "aten/execution/fallback_policy.h"
#include "aten/execution/op_table.h"
#include "aten/memory/allocator.h"
#include "aten/neuron.h"

namespace neuron_sim {
namespace {

c10::Device target(std::optional<c10::Device> device) {
  if (device && device->has_index()) return *device;
  return neuronDevice(currentDeviceIndex());
}

void checkLayout(std::optional<c10::Layout> layout) {
  if (layout && *layout != c10::kStrided) noteUnsupported("sparse tensors");
  TORCH_CHECK_NOT_IMPLEMENTED(!layout || *layout == c10::kStrided,
      "neuron: ", *layout, " tensors are not supported: Trainium (TorchNeuron) has no sparse or other non-strided "
      "layouts. Convert with .to_dense() before moving the tensor to neuron.");
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> /*pin_memory*/,
                               std::optional<c10::MemoryFormat> memory_format) {
  static OpEntry& tracked = kernelEntry("aten::empty", "memory_format");  // recorded as "aten::empty"
  recordKernelRun(tracked);
  checkLayout(layout);
  c10::DeviceGuard guard(target(device));  // allocation happens on the guarded device
  return at::detail::empty_generic(size, deviceAllocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> /*pin_memory*/) {
  static OpEntry& tracked = kernelEntry("aten::empty_strided", "");
  recordKernelRun(tracked);
  checkLayout(layout);
  c10::DeviceGuard guard(target(device));
  return at::detail::empty_strided_generic(size, stride, deviceAllocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

// A C++ kernel of the device (recorded as "aten::new_empty"): the tensor is
// allocated through empty, on self's device unless told otherwise.
at::Tensor new_empty(const at::Tensor& self, c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                     std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                     std::optional<bool> pin_memory) {
  static OpEntry& tracked = kernelEntry("aten::new_empty", "");
  recordKernelRun(tracked);
  return at::empty(size, self.options().merge_in(at::TensorOptions().dtype(dtype).layout(layout).device(device)
                                                     .pinned_memory(pin_memory)));
}

// Tensors of other layouts on neuron (sparse, quantized) fail loudly, naming
// the limitation, instead of a dispatcher error about missing kernels.
void unsupportedLayout(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack*) {
  const char* what = ks.has(c10::DispatchKey::SparsePrivateUse1) ? "sparse"
                     : ks.has(c10::DispatchKey::QuantizedPrivateUse1) ? "quantized" : "sparse CSR";
  noteUnsupported(std::string(what) + " tensors");
  TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron: ", what, " tensors are not supported (", op.schema().name(),
      "): Trainium (TorchNeuron) runs dense strided tensors only. Convert with ",
      std::string(what) == "quantized" ? ".dequantize()" : ".to_dense()", " before moving the tensor to neuron.");
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("new_empty", new_empty);
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupportedLayout>());
}
TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupportedLayout>());
}
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupportedLayout>());
}
// A sparse CSR tensor on neuron can exist: x.to_sparse_csr() runs on the CPU
// and PyTorch builds the result on the device without dispatching to it, as
// on TorchNeuron. Its first use must still name the limitation, but these ops
// have a CompositeExplicitAutograd kernel, which the dispatcher prefers to a
// backend fallback: their defaults raise PyTorch's puzzling "col_indices
// expected sparse row compressed tensor layout but got SparseCsr" (every copy
// to the CPU, to_dense and print reads the indices first). Metadata queries
// (sparse_dim, dense_dim, is_pinned) keep their defaults.
TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  for (const char* op : {"crow_indices", "col_indices", "ccol_indices", "row_indices", "values", "clone", "copy_",
                         "empty_like", "select.int", "sum", "abs", "abs_", "isinf", "mul.Scalar", "mul_.Scalar",
                         "_conj_physical", "conj_physical_", "deg2rad", "deg2rad.out", "deg2rad_", "rad2deg",
                         "rad2deg.out", "rad2deg_"})
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&unsupportedLayout>());
}

}  // namespace neuron_sim
