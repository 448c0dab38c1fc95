#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/collective_staging.h"

#include <ATen/ops/empty.h>

#include "aten/execution/tensor_alias.h"

namespace neuron_sim::distributed {

uint64_t bytesOf(const at::Tensor& t) { return static_cast<uint64_t>(t.numel()) * t.element_size(); }

uint64_t bytesOf(const std::vector<at::Tensor>& ts) {
  uint64_t n = 0;
  for (const auto& t : ts) n += bytesOf(t);
  return n;
}

at::Tensor asBytes(const at::Tensor& host) { return host.reshape({-1}).view(at::kByte); }

at::Tensor readable(const at::Tensor& t, Staging& s) {
  if (t.is_contiguous()) return hostAlias(t);
  at::Tensor tmp = at::empty(t.sizes(), t.options().memory_format(at::MemoryFormat::Contiguous));
  at::Tensor h = hostAlias(tmp);
  h.copy_(hostAlias(t));
  s.keep.push_back(tmp);
  return h;
}

at::Tensor writable(const at::Tensor& t, Staging& s, bool copy_in, bool write_back) {
  if (t.is_contiguous()) return hostAlias(t);
  at::Tensor tmp = at::empty(t.sizes(), t.options().memory_format(at::MemoryFormat::Contiguous));
  at::Tensor h = hostAlias(tmp);
  if (copy_in) h.copy_(hostAlias(t));
  s.keep.push_back(tmp);
  if (write_back) {
    at::Tensor dst = hostAlias(t);
    s.steps.push_back([h, dst]() mutable { dst.copy_(h); });
  }
  return h;
}

}  // namespace neuron_sim::distributed
