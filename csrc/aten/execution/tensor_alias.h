// The two views of arena memory (tensor_alias.cpp): a neuron tensor seen as
// a CPU tensor and back, without copying.
#pragma once
#include <ATen/core/Tensor.h>

#include "aten/neuron.h"

namespace neuron_sim {

// A CPU tensor over the same arena bytes as a neuron tensor: no copy.
at::Tensor hostAlias(const at::Tensor& neuron);
// What a CPU kernel is given for a tensor argument: a neuron tensor's host
// alias; any other tensor (a CPU scalar, an undefined one) as it is.
inline at::Tensor onHost(const at::Tensor& t) {
  return t.defined() && t.device().type() == kNeuron ? hostAlias(t) : t;
}
// Turns a CPU tensor whose bytes were allocated in the arena into a neuron
// tensor owning them (no copy); anything else is copied into the arena.
at::Tensor adoptAsDevice(const at::Tensor& host, int device);
// A neuron tensor with `geometry`'s sizes/strides/offset over `storage_of`'s storage.
at::Tensor viewOnDevice(const at::Tensor& storage_of, const at::Tensor& geometry);

}  // namespace neuron_sim
