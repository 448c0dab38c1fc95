// torch_neuron_sim._C's functions about the fallback policy: warn or error on a
// CPU fallback, fallback only for unimplemented ops, and the unsupported features hit.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <torch/csrc/utils/pybind.h>

#include <string>

#include "aten/execution/fallback_policy.h"

#include "bindings/bindings.h"

namespace neuron_sim::bindings {

void registerFallbackPolicyBindings(py::module_& m) {
  // The fallback policy
  m.def("_set_fallback_mode", [](const std::string& mode) {
    if (mode == "error") setFallbackMode(FallbackMode::kError);
    else if (mode == "warn") setFallbackMode(FallbackMode::kWarn);
    else throw py::value_error("fallback mode must be 'warn' or 'error', got '" + mode + "'");
  });
  m.def("_fallback_mode", [] { return fallbackMode() == FallbackMode::kError ? "error" : "warn"; });
  m.def("_set_fallback_only_for_unimplemented", &setFallbackOnlyForUnimplemented);
  m.def("_unsupported_hits", &unsupportedHits);
}

}  // namespace neuron_sim::bindings
