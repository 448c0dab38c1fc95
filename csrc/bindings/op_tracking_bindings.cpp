// torch_neuron_sim._C's functions about op tracking and the op record
// (torch_neuron_sim.tracking): the counts, the ops never tracked, named kernel
// runs (NKI kernels), each op's statistics.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <torch/csrc/utils/pybind.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "aten/execution/kernel_runs.h"
#include "aten/execution/op_table.h"

#include "bindings/bindings.h"

namespace neuron_sim::bindings {

void registerOpTrackingBindings(py::module_& m) {
  // (overload called, name the device records, executed, fallbacks)
  m.def("_op_counts", [] {
    py::list out;
    for (const auto& c : opCounts()) out.append(py::make_tuple(c.name, c.recorded, c.executed, c.fallbacks));
    return out;
  });
  m.def("_clear_op_tracking", &clearOpTracking);
  m.def("_untracked_op_names", &untrackedOpNames);
  m.def("_record_named_run", &recordNamedKernelRun);
  m.def("_op_stats", [] {
    py::list out;
    for (const auto& s : opStats())
      out.append(asDict(s, NEURON_FIELD(OpStats, name), NEURON_FIELD(OpStats, native),
                        NEURON_FIELD(OpStats, executed), NEURON_FIELD(OpStats, fallbacks),
                        NEURON_FIELD(OpStats, downcasts_f64), NEURON_FIELD(OpStats, downcasts_i64),
                        NEURON_FIELD(OpStats, compilations), NEURON_FIELD(OpStats, cache_hits),
                        NEURON_FIELD(OpStats, widened), NEURON_FIELD(OpStats, time_ns),
                        NEURON_FIELD(OpStats, copy_ns), NEURON_FIELD(OpStats, copied_bytes)));
    return out;
  });
}

}  // namespace neuron_sim::bindings
