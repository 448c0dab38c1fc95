// The Python bindings of the distributed layer (called from the _C module).
#pragma once
#include <pybind11/pybind11.h>

namespace neuron_sim::distributed {
void registerDistributedBindings(pybind11::module_& m);
}
