// torch_neuron_sim._C's reading of the environment: the one rule of what a true
// flag is (runtime/environment.h), which torch_neuron_sim/environment.py reads
// its flags through.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)

#include <string>

#include "bindings/bindings.h"
#include "runtime/environment.h"

namespace neuron_sim::bindings {

void registerEnvironmentBindings(py::module_& m) {
  m.def("_env_flag", [](const std::string& name, bool default_value) {
    return runtime::envFlag(name.c_str(), default_value);
  });
}

}  // namespace neuron_sim::bindings
