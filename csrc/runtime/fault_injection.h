// Injected allocation failures (NEURON_SIM_FAIL_ALLOC_AT=N,
// torch_neuron_sim.inject_oom): the Nth allocation from the moment of arming
// fails as if the device were full, so users can test their OOM handling.
#pragma once
#include <cstdint>

namespace neuron_sim::runtime {

// Arms a failure of the nth allocation from now (n >= 1); n <= 0 disarms.
void armAllocationFailure(int64_t n);
// Allocations left before the armed failure (1 = the next one fails), 0 if
// none is armed.
int64_t allocationsUntilFailure();
// Called once per allocation while kFailAlloc is on: true for the one that must fail.
bool consumeAllocation();

namespace detail {
// For the environment reader: sets the countdown without touching the modes word.
void setCountdown(int64_t n);
}

}  // namespace neuron_sim::runtime
