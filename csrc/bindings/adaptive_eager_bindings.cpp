// torch_neuron_sim._C's adaptive eager (torch_neuron_sim.execution.adaptive_eager,
// TORCH_NEURONX_ENABLE_CONCATENATION): the switch, the run limit, flushes, the counts.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "aten/execution/adaptive_eager.h"
#include "bindings/bindings.h"
#include "runtime/adaptive_eager.h"

namespace neuron_sim::bindings {

void registerAdaptiveEagerBindings(py::module_& m) {
  // Adaptive eager (TORCH_NEURONX_ENABLE_CONCATENATION)
  m.def("_set_adaptive_eager", &setAdaptiveEager);
  m.def("_adaptive_eager_enabled", &runtime::adaptive::enabled);
  m.def("_set_adaptive_eager_max_ops", [](int64_t n) {
    if (n < 1) throw py::value_error("adaptive eager: a fused launch holds at least 1 op, got " + std::to_string(n));
    runtime::adaptive::setMaxOps(static_cast<uint32_t>(std::min<int64_t>(n, UINT32_MAX)));
  });
  m.def("_adaptive_eager_max_ops", &runtime::adaptive::maxOps);
  m.def("_adaptive_eager_flush", [](bool kernel_call) {
    flushAllPoint(kernel_call ? runtime::adaptive::Flush::kKernelCall : runtime::adaptive::Flush::kExplicit);
  });
  m.def("_adaptive_eager_stats", [] {
    const runtime::adaptive::Stats s = runtime::adaptive::stats();
    py::dict flushes;
    for (int i = 0; i < runtime::adaptive::kFlushReasons; ++i)
      flushes[runtime::adaptive::flushName(static_cast<runtime::adaptive::Flush>(i))] = s.flushes[i];
    py::dict d;
    d["ops"] = s.ops;
    d["launches"] = s.launches;
    d["fused_launches"] = s.fused_launches;
    d["fused_ops"] = s.fused_ops;
    d["compilations"] = s.compilations;
    d["cache_hits"] = s.cache_hits;
    d["flushes"] = flushes;
    return d;
  });
  m.def("_clear_adaptive_eager_stats", &runtime::adaptive::clearStats);
}

}  // namespace neuron_sim::bindings
