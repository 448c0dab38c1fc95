// The devices of the simulated machine: their allocators, the calling thread's
// current device, and the state that a fork() invalidates. Plain C++, no torch.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/caching_allocator.h"
#include "runtime/device_table.h"

namespace neuron_sim::runtime {

int deviceCount();  // visible logical NeuronCores; throws on a bad environment

// Throws std::out_of_range with "Device index N is out of range. Valid range
// is 0 to M for this process" (the real runtime's words).
void checkDevice(int index);

// The caching allocator of a device (and its HBM arena), reserved on first use.
CachingAllocator& allocator(int index);
// The allocator whose HBM a pointer lies in, or nullptr.
CachingAllocator* allocatorOwning(const void* ptr);
// The allocator of a device if it was already reserved, else nullptr (never reserves).
CachingAllocator* reservedAllocator(int index);

int currentDevice();          // thread-local, 0 by default
void setCurrentDevice(int index);

// True once any device was used in this process: a forked child then
// refuses to touch the devices, as the real runtime does.
bool isInitialized();
void markInitialized();
bool inBadFork();
// Throws std::runtime_error telling the user to use 'spawn' when called in a
// child forked after initialisation.
void checkNotForked();

}  // namespace neuron_sim::runtime
