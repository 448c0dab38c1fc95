// The current neuron device of the calling thread, as the device guard (guard.cpp) keeps it.
#pragma once
#include <cstdint>

namespace neuron_sim {

int currentDeviceIndex();
int64_t currentStreamId(int device);  // the calling thread's current stream on `device` (0: default)

// One stream per device unless NEURON_RT_ENABLE_HOST_CC=1, as on TorchNeuron:
// the variable is read at each stream creation.
bool multiStreamMode();

}  // namespace neuron_sim
