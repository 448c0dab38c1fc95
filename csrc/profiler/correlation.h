// The profiler's correlation id of the CPU op running on this thread. Kineto
// pushes it through the session (kineto_session.cpp) when a CPU op begins and
// pops it when the op ends; a device event recorded meanwhile carries it, and
// the trace links the two (flow arrows, key_averages' device time per op).
// Plain C++: the Kineto session includes it without ATen.
#pragma once
#include <cstdint>

namespace neuron_sim::profiler {

void pushCorrelation(uint64_t id);
void popCorrelation();
uint64_t currentCorrelation();  // 0 when no profiled CPU op is running on this thread

}  // namespace neuron_sim::profiler
