// Pinned ("page-locked") host memory: what tensor.pin_memory(), pin_memory=True
// factories and DataLoader(pin_memory=True) allocate for neuron.
#pragma once
#include <c10/core/Allocator.h>

namespace neuron_sim {

c10::Allocator* pinnedHostAllocator();
// True for any address inside a live pinned allocation (as cuda answers for
// pointers into the middle of a cudaHostAlloc block).
bool isPinnedHostPtr(const void* p);

}  // namespace neuron_sim
