// Moving tensors between the two views of arena memory without copying:
// a neuron tensor seen as a CPU tensor (so a CPU kernel can run on it), and a
// CPU kernel's arena-backed output taken back as a neuron tensor.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <ATen/ops/empty_strided.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>

#include "aten/execution/tensor_alias.h"
#include "aten/memory/allocator.h"
#include "aten/neuron.h"

namespace neuron_sim {

at::Tensor hostAlias(const at::Tensor& t) {
  const c10::StorageImpl* src = t.storage().unsafeGetStorageImpl();
  // A non-owning CPU DataPtr: the neuron tensor keeps the bytes alive for the
  // duration of the op. Resizable through the host-view allocator, so a CPU
  // kernel that grows an out= argument grows it inside the arena.
  auto storage = c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), src->nbytes(),
      c10::DataPtr(const_cast<void*>(src->data()), c10::Device(c10::kCPU)), hostViewAllocator(),
      /*resizable=*/true);
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(std::move(storage)),
                                                  c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  // Conjugate and negative views are lazy: the bytes hold the unconjugated
  // values and a bit says so. The kernels that receive such views (copies,
  // and the ops PyTorch lets through the Conjugate/Negative keys) read it.
  if (C10_UNLIKELY(t.is_conj())) impl->_set_conj(true);
  if (C10_UNLIKELY(t.is_neg())) impl->_set_neg(true);
  return at::Tensor(std::move(impl));
}

// The aliases this thread's last fast-path call left, ready for the next;
// busy while a call uses them.
struct HostAliases::Kept {
  at::Tensor alias[kSlots];
  bool busy = false;
};

namespace {
thread_local HostAliases::Kept t_kept;

// Nobody but the holder refers to the alias or its storage: a kernel kept neither.
// (An alias's storage never throws on access: it is ours.)
inline bool unshared(const at::Tensor& a) {
  return a.use_count() == 1 && a.weak_use_count() == 1 &&
         a.unsafeGetTensorImpl()->unsafe_storage().use_count() == 1;
}

// Equal sizes or strides: a loop over a few elements, cheaper than memcmp's call.
inline bool sameInts(c10::IntArrayRef a, c10::IntArrayRef b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// `alias` (unshared) re-pointed at `t`'s bytes (`t` has a storage), as
// hostAlias(t) would build it. Only what differs is rewritten: a slot often
// sees the same tensor again (a weight, a loop's operand), and the same
// geometry more often still (an elementwise chain), where setting sizes and
// strides would recompute every contiguity flag to the values they have.
void repoint(at::Tensor& alias, const at::Tensor& t) {
  c10::TensorImpl* impl = alias.unsafeGetTensorImpl();
  const c10::TensorImpl* from = t.unsafeGetTensorImpl();
  c10::StorageImpl* storage = impl->unsafe_storage().unsafeGetStorageImpl();
  const c10::StorageImpl* src = from->unsafe_storage().unsafeGetStorageImpl();
  void* data = const_cast<void*>(src->data());
  if (storage->data() != data) storage->set_data_ptr_noswap(c10::DataPtr(data, c10::Device(c10::kCPU)));
  if (storage->nbytes() != src->nbytes()) storage->set_nbytes(src->nbytes());
  if (C10_UNLIKELY(impl->dtype() != from->dtype())) impl->set_storage_and_dtype(impl->storage(), from->dtype());
  const c10::IntArrayRef sizes = from->sizes(), strides = from->strides();
  const int64_t offset = from->storage_offset();
  if (sameInts(impl->sizes(), sizes) && sameInts(impl->strides(), strides)) {
    if (impl->storage_offset() != offset) impl->set_storage_offset(offset);
  } else {
    impl->set_sizes_and_strides(sizes, strides, offset);
  }
  if (C10_UNLIKELY(impl->is_conj() != from->is_conj())) impl->_set_conj(from->is_conj());
  if (C10_UNLIKELY(impl->is_neg() != from->is_neg())) impl->_set_neg(from->is_neg());
}
}  // namespace

const at::Tensor& HostAliases::alias(const at::Tensor& t) {
  if (!looked_) {
    looked_ = true;
    Kept& k = t_kept;  // one TLS lookup per call
    if (!k.busy) {     // (busy: a kernel of this thread's running call reached the fast path again)
      k.busy = true;
      kept_ = &k;
    }
  }
  // (A tensor without storage goes to hostAlias, whose storage() words the error.)
  if (kept_ == nullptr || used_ == kSlots || C10_UNLIKELY(!t.unsafeGetTensorImpl()->unsafe_storage()))
    return fresh_[fresh_count_++] = hostAlias(t);
  // The kernel reads the kept alias where it is: a kept alias was unshared
  // when its call ended, and nothing but this thread's slot has reached it since.
  at::Tensor& a = kept_->alias[used_++];
  if (a.defined()) repoint(a, t);
  else a = hostAlias(t);
  return a;
}

HostAliases::~HostAliases() {
  for (int i = 0; i < optional_count_; ++i) optionals_[i].reset();  // their references are ours, not a kernel's
  if (kept_ == nullptr) return;
  for (int i = 0; i < used_; ++i)
    if (!unshared(kept_->alias[i])) kept_->alias[i].reset();  // a kernel kept it: the next call builds afresh
  kept_->busy = false;
}

namespace {
// Host aliases the boxed path's calls gave back on this thread, for its next.
struct AliasPool {
  static constexpr int kSize = 8;
  at::Tensor free[kSize];
  int count = 0;
};
thread_local AliasPool t_pool;
}  // namespace

at::Tensor pooledHostAlias(const at::Tensor& t) {
  AliasPool& p = t_pool;
  if (p.count == 0 || C10_UNLIKELY(!t.unsafeGetTensorImpl()->unsafe_storage())) return hostAlias(t);
  at::Tensor a = std::move(p.free[--p.count]);
  repoint(a, t);
  return a;
}

void recycleHostAlias(at::Tensor&& alias) {
  if (!alias.defined() || !unshared(alias)) return;  // a kernel or a result kept it
  // (A kernel that gave the alias another storage, as set_() does, made it no longer ours.)
  if (alias.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl()->allocator() != hostViewAllocator()) return;
  AliasPool& p = t_pool;
  if (p.count < AliasPool::kSize) p.free[p.count++] = std::move(alias);
}

at::Tensor viewOnDevice(const at::Tensor& storage_of, const at::Tensor& geometry) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(storage_of.storage()),
                                                  c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                  geometry.dtype());
  impl->set_sizes_and_strides(geometry.sizes(), geometry.strides(), geometry.storage_offset());
  if (C10_UNLIKELY(geometry.is_conj())) impl->_set_conj(true);
  if (C10_UNLIKELY(geometry.is_neg())) impl->_set_neg(true);
  return at::Tensor(std::move(impl));
}

namespace {
// Whether `host`'s bytes are the arena's (of `device`, or labelled CPU) and
// may be relabelled as device memory.
bool arenaBytesFor(c10::StorageImpl* s, int device) {
  const c10::DataPtr& dp = s->data_ptr();
  const bool arena_bytes = isArenaMemory(dp) || (dp.get() == nullptr && s->nbytes() == 0);
  return arena_bytes && (dp.get() == nullptr || dp.device().is_cpu() || dp.device().index() == device);
}

// The kernel allocated this output inside our arena: relabel the bytes as
// device memory (no copy) and give the storage the device allocator.
void relabelStorage(c10::StorageImpl* s, int device) {
  s->mutable_data_ptr().unsafe_set_device(neuronDevice(device));
  s->set_allocator(deviceAllocator());
}

// When nobody but the caller holds the kernel's arena-backed output, turns it
// into the neuron tensor in place (its storage now reports the neuron
// device), saving a TensorImpl allocation on the per-op path.
bool adoptInPlace(const at::Tensor& host, int device) {
  c10::TensorImpl* own = host.unsafeGetTensorImpl();
  c10::StorageImpl* s = own->unsafe_storage().unsafeGetStorageImpl();
  if (s == nullptr || host.use_count() != 1 || !own->allow_tensor_metadata_change() || !arenaBytesFor(s, device))
    return false;  // (no storage: the general path's storage() words the error)
  relabelStorage(s, device);
  // The storage is handed back to the impl it came from (which re-reads
  // its device): moved out and in, so its reference count is not touched.
  auto& held = const_cast<c10::Storage&>(own->unsafe_storage());
  own->set_storage_keep_dtype(std::move(held));
  own->_change_backend_component_keys(neuronDevice(device));
  return true;
}
}  // namespace

at::Tensor adoptAsDevice(const at::Tensor& host, int device) {
  if (adoptInPlace(host, device)) return host;
  c10::StorageImpl* s = host.storage().unsafeGetStorageImpl();
  if (arenaBytesFor(s, device)) {
    relabelStorage(s, device);
    auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(host.storage()),
                                                    c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                    host.dtype());
    impl->set_sizes_and_strides(host.sizes(), host.strides(), host.storage_offset());
    return at::Tensor(std::move(impl));
  }
  // Memory from elsewhere (a kernel's worker thread, a cached constant):
  // never adopt it; copy it into the arena.
  at::Tensor out = at::empty_strided(host.sizes(), host.strides(),
                                     host.options().device(neuronDevice(device)));
  hostAlias(out).copy_(host);
  return out;
}

at::Tensor adoptAsDevice(at::Tensor&& host, int device) {
  if (adoptInPlace(host, device)) return std::move(host);  // the caller's handle, not a copy of it
  return adoptAsDevice(static_cast<const at::Tensor&>(host), device);
}

}  // namespace neuron_sim
