// torch_neuron_sim._C's device numerics (torch_neuron_sim.numerics(), docs/numerics.md):
// the switches read from the device's environment, a re-read, and the ops whose integer
// results reached the range where fp32 rounds them.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <torch/csrc/utils/pybind.h>

#include <string>

#include "aten/execution/numerics.h"
#include "bindings/bindings.h"
#include "runtime/numerics.h"

namespace neuron_sim::bindings {

void registerNumericsBindings(py::module_& m) {
  m.def("_numerics", [] {
    const runtime::numerics::Settings s = numericsSettings();
    py::dict d;
    d["stochastic_rounding"] = s.stochastic;
    d["stochastic_rounding_seed"] = s.seed;
    d["auto_cast"] = std::string(s.auto_cast);
    d["auto_cast_type"] = std::string(runtime::numerics::formatName(s.auto_cast_type));
    d["cc_flags"] = s.cc_flags;
    return d;
  });
  m.def("_numerics_reread", &runtime::numerics::reset);
  m.def("_rounding_hits", &roundingHits);
  m.def("_clear_rounding_hits", &clearRoundingHits);
}

}  // namespace neuron_sim::bindings
