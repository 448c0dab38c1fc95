// The profiler's correlation id of the CPU op running on this thread. Kineto
// pushes it through the session (profiler/kineto_session.cpp) when a CPU op
// begins and pops it when the op ends; a device event recorded meanwhile
// carries it, and the trace links the two (flow arrows, key_averages' device
// time per op). Owned by the runtime, beside the timeline whose events carry
// it, so the op path that records events and the profiler that sets the id
// both reach it downwards.
#pragma once
#include <cstdint>

namespace neuron_sim::runtime {

void pushCorrelation(uint64_t id);
void popCorrelation();
uint64_t currentCorrelation();  // 0 when no profiled CPU op is running on this thread

}  // namespace neuron_sim::runtime
