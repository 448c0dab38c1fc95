// The Kineto activity profiler of the neuron device (kineto_session.cpp),
// built into torch_neuron_sim._kineto only. Plain C++ for its callers.
#pragma once
#include "profiler/timeline_api.h"

namespace neuron_sim::profiler {

// Hands the session the device timeline of torch_neuron_sim._C (a table of
// function pointers, passed from _C to _kineto as a capsule at import).
void connectTimeline(const TimelineApi* api);

}  // namespace neuron_sim::profiler
