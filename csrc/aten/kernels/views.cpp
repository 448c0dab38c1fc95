// Views and storage surgery: kernels that change only metadata (sizes,
// strides, offset, which storage) and must alias the same arena bytes. They
// never go through the fallback, which would copy and break aliasing.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <torch/library.h>

#include <cstring>

#include "aten/memory/allocator.h"
#include "aten/execution/op_table.h"
#include "aten/neuron.h"
#include "runtime/host_access.h"

namespace neuron_sim {
namespace {

// Grows a storage inside the arena, keeping its bytes.
void ensureStorageBytes(const at::Tensor& self, size_t nbytes) {
  c10::StorageImpl* s = self.storage().unsafeGetStorageImpl();
  if (nbytes <= s->nbytes()) return;
  TORCH_CHECK(s->resizable(), "Trying to resize storage that is not resizable");
  int device = self.device().index();
  c10::DataPtr fresh = allocateOn(device, nbytes, neuronDevice(device));
  runtime::HostAccess access;  // NEURON_SIM_PROTECT
  if (s->nbytes() > 0 && s->data()) std::memcpy(fresh.get(), s->data(), s->nbytes());
  s->set_data_ptr_noswap(std::move(fresh));
  s->set_nbytes(nbytes);
}

size_t bytesNeeded(c10::IntArrayRef size, c10::IntArrayRef stride, int64_t offset, size_t itemsize) {
  int64_t extent = 1;
  for (size_t i = 0; i < size.size(); ++i) {
    if (size[i] == 0) return 0;
    extent += (size[i] - 1) * stride[i];
  }
  return static_cast<size_t>(offset + extent) * itemsize;
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  static OpEntry& tracked = kernelEntry("aten::resize_", "");
  recordKernelRun(tracked);
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  auto mf = memory_format.value_or(c10::MemoryFormat::Contiguous);
  TORCH_CHECK(mf != c10::MemoryFormat::Preserve, "Unsupported memory format ", mf);
  if (mf != c10::MemoryFormat::Contiguous) impl->empty_tensor_restride(mf);
  ensureStorageBytes(self, bytesNeeded(self.sizes(), self.strides(), self.storage_offset(), self.itemsize()));
  return self;
}

// Every set_ overload is a C++ kernel of the device, recorded as "aten::set_",
// with the device's messages; a CPU source never falls back.
void recordSet() {
  static OpEntry& tracked = kernelEntry("aten::set_", "source_Storage_storage_offset");
  recordKernelRun(tracked);
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size,
                        c10::IntArrayRef stride) {
  TORCH_CHECK(source.device().type() == kNeuron || source.nbytes() == 0,
              "set_: expected neuron source tensor, but got tensor on device ", source.device());
  TORCH_CHECK(offset >= 0, "Tensor: invalid storage offset ", offset);
  auto* impl = self.unsafeGetTensorImpl();
  if (!self.storage().is_alias_of(source)) impl->set_storage_keep_dtype(std::move(source));
  if (stride.empty()) {
    impl->set_sizes_contiguous(size);
    impl->set_storage_offset(offset);
  } else {
    impl->set_sizes_and_strides(size, stride, offset);
  }
  ensureStorageBytes(self, bytesNeeded(self.sizes(), self.strides(), offset, self.itemsize()));
  return self;
}

at::Tensor& set_source_storage_offset(at::Tensor& self, c10::Storage source, int64_t offset,
                                     c10::IntArrayRef size, c10::IntArrayRef stride) {
  recordSet();
  return set_storage(self, std::move(source), offset, size, stride);
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  recordSet();
  size_t n = source.nbytes() / self.itemsize();
  return set_storage(self, std::move(source), 0, {static_cast<int64_t>(n)}, {});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& src) {
  recordSet();
  TORCH_CHECK(src.device().type() == kNeuron, "set_: expected neuron source tensor, but got tensor on device ",
              src.device());
  if (self.unsafeGetTensorImpl() == src.unsafeGetTensorImpl()) return self;
  return set_storage(self, src.storage(), src.storage_offset(), src.sizes(), src.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  recordSet();
  auto fresh = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), 0,
                                                     deviceAllocator()->allocate(0), deviceAllocator(), true);
  return set_storage(self, c10::Storage(std::move(fresh)), 0, {0}, {});
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("unfold", at::native::unfold);
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage_storage_offset", set_source_storage_offset);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_", set_empty);
}

}  // namespace neuron_sim
