// Registers the profiler functions of torch_neuron_sim._C (profiler_bindings.cpp).
#pragma once

namespace pybind11 { class module_; }

namespace neuron_sim {
void registerProfilerBindings(pybind11::module_& m);
}
