// The two views of arena memory (tensor_alias.cpp): a neuron tensor seen as
// a CPU tensor and back, without copying.
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>

#include "aten/neuron.h"

namespace neuron_sim {

// A CPU tensor over the same arena bytes as a neuron tensor: no copy.
at::Tensor hostAlias(const at::Tensor& neuron);
// What a CPU kernel is given for a tensor argument: a neuron tensor's host
// alias; any other tensor (a CPU scalar, an undefined one) as it is.
inline at::Tensor onHost(const at::Tensor& t) {
  return t.defined() && t.device().type() == kNeuron ? hostAlias(t) : t;
}
// The host aliases of one fast-path call (fast_path.cpp), for read-only
// inputs. A fresh alias is two heap objects built and destroyed per input
// per op; instead each thread keeps the aliases of its last call, and the
// next call re-points them at its own tensors' bytes and geometry. An alias
// that a kernel kept a reference to is never reused.
class HostAliases {
 public:
  HostAliases() = default;
  HostAliases(const HostAliases&) = delete;
  HostAliases& operator=(const HostAliases&) = delete;
  ~HostAliases();
  // What the CPU kernel is given for each argument, as onHost.
  const at::Tensor& of(const at::Tensor& t) {
    return t.defined() && t.device().type() == kNeuron ? alias(t) : t;
  }
  const std::optional<at::Tensor>& of(const std::optional<at::Tensor>& t) {  // linear's bias
    if (!t || !t->defined() || t->device().type() != kNeuron) return t;
    return optionals_[optional_count_++] = alias(*t);
  }
  template <class T>
  const T& of(const T& v) {
    return v;
  }

  static constexpr int kSlots = 4;  // the fast path's ops take at most four tensors (addmm.out)
  struct Kept;

 private:
  const at::Tensor& alias(const at::Tensor& t);
  Kept* kept_ = nullptr;  // this thread's kept aliases, while this call uses them
  bool looked_ = false;
  int used_ = 0, fresh_count_ = 0, optional_count_ = 0;
  at::Tensor fresh_[kSlots];  // this call's own: beyond the kept slots, or while another call uses them
  std::optional<at::Tensor> optionals_[kSlots];  // aliases given as optional tensors (a second reference each)
};
// The boxed path's host aliases (execution.cpp): as hostAlias, but built
// from an alias an earlier call on this thread gave back when there is one
// (re-pointed as HostAliases does), and given back after the call; an alias
// that anything else still refers to is not kept.
at::Tensor pooledHostAlias(const at::Tensor& t);
void recycleHostAlias(at::Tensor&& alias);
// Turns a CPU tensor whose bytes were allocated in the arena into a neuron
// tensor owning them (no copy); anything else is copied into the arena.
at::Tensor adoptAsDevice(const at::Tensor& host, int device);
at::Tensor adoptAsDevice(at::Tensor&& host, int device);  // the same, handing back the caller's handle
// A neuron tensor with `geometry`'s sizes/strides/offset over `storage_of`'s storage.
at::Tensor viewOnDevice(const at::Tensor& storage_of, const at::Tensor& geometry);

}  // namespace neuron_sim
