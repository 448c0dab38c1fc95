// The caching allocator as PyTorch sees it (allocator.cpp): the PrivateUse1 allocator,
// and the CPU allocator wrapper that lets a CPU kernel write device memory.
#pragma once
#include <c10/core/Allocator.h>
#include <c10/core/Device.h>

#include <cstddef>

namespace neuron_sim {

// The PrivateUse1 allocator: arena memory labelled as a neuron device.
c10::Allocator* deviceAllocator();
// The same arena memory labelled as CPU, so a CPU kernel may write it.
c10::Allocator* hostViewAllocator();
// Every DataPtr whose bytes live in an arena has this deleter.
void arenaDelete(void* ptr);
inline bool isArenaMemory(const c10::DataPtr& p) { return p.get_deleter() == &arenaDelete; }
// Frees memory from allocateOn whose DataPtr released it
// (caching_allocator_delete); throws std::invalid_argument for a pointer that
// is no live block of a device's allocator.
void rawFree(void* ptr);
// Allocates `bytes` on `device`, raising torch.OutOfMemoryError when it does not fit.
c10::DataPtr allocateOn(int device, size_t bytes, c10::Device label);
// Called once before the retry of an allocation that did not fit.
void setReclaimHook(void (*hook)());

// While alive, CPU allocations on this thread are served from the arena of
// `device` (the CPU allocator is wrapped at load time). This lets a CPU
// kernel write its outputs straight into device memory.
class ArenaScope {
 public:
  explicit ArenaScope(int device);
  ~ArenaScope();
  ArenaScope(const ArenaScope&) = delete;
  ArenaScope& operator=(const ArenaScope&) = delete;
 private:
  int* slot_;  // this thread's arena device
  int previous_;
};
void installHostAllocatorWrapper();

}  // namespace neuron_sim
