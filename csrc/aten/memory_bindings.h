// Registers the memory functions of torch_neuron_sim._C (memory_bindings.cpp).
#pragma once

namespace pybind11 { class module_; }

namespace neuron_sim {
void registerMemoryBindings(pybind11::module_& m);
}
