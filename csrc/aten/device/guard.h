// The current neuron device of the calling thread, as the device guard (guard.cpp) keeps it.
#pragma once
#include <cstdint>

namespace neuron_sim {

int currentDeviceIndex();
int64_t currentStreamId(int device);  // the calling thread's current stream on `device` (0: default)

}  // namespace neuron_sim
