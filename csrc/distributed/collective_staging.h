// How a device tensor is seen by gloo. Device bytes are host memory: a
// contiguous tensor is handed to gloo as a host alias, no copy. Anything gloo
// cannot take as it is (a non-contiguous layout) goes through a contiguous
// staging tensor allocated on the same device, so it counts in HBM
// accounting, and is copied back by a finishing step when gloo has written it.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "distributed/neuron_work.h"

namespace neuron_sim::distributed {

struct Staging {
  std::vector<at::Tensor> keep;  // device tensors gloo reads or writes
  std::vector<Finish> steps;     // run in order when gloo is done
};

uint64_t bytesOf(const at::Tensor& t);
uint64_t bytesOf(const std::vector<at::Tensor>& ts);

// Any dtype moves as bytes: a flat uint8 view of a contiguous host tensor.
at::Tensor asBytes(const at::Tensor& host);

// A contiguous host view of `t` for gloo to read.
at::Tensor readable(const at::Tensor& t, Staging& s);

// A contiguous host view of `t` for gloo to write; a staged one is copied back
// into `t` by a finishing step (only when `write_back`).
at::Tensor writable(const at::Tensor& t, Staging& s, bool copy_in, bool write_back = true);

}  // namespace neuron_sim::distributed
