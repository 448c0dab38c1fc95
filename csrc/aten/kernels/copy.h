// Copies between host and device (copy.cpp), counted: a native op makes
// none, a fallback op copies its inputs out and its results back. The count
// is what torch_neuronx's tests read as "CPU bounce" copies.
#pragma once
#include <cstdint>

namespace neuron_sim {

uint64_t hostDeviceCopies();  // since the process started

}  // namespace neuron_sim
