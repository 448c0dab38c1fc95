// What the ATen glue files share. Kept lean: every file including this
// compiles against torch headers, and each one costs ~30 s.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/Device.h>

namespace neuron_sim {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;

inline c10::Device neuronDevice(int index) {
  return c10::Device(kNeuron, static_cast<c10::DeviceIndex>(index));
}

// ---- allocator.cpp -------------------------------------------------------
// The PrivateUse1 allocator: arena memory labelled as a neuron device.
c10::Allocator* deviceAllocator();
// The same arena memory labelled as CPU, so a CPU kernel may write it.
c10::Allocator* hostViewAllocator();
// Every DataPtr whose bytes live in an arena has this deleter.
void arenaDelete(void* ptr);
inline bool isArenaMemory(const c10::DataPtr& p) { return p.get_deleter() == &arenaDelete; }
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
  int previous_;
};
void installHostAllocatorWrapper();

// ---- tensor_alias.cpp -----------------------------------------------------
// A CPU tensor over the same arena bytes as a neuron tensor: no copy.
at::Tensor hostAlias(const at::Tensor& neuron);
// Turns a CPU tensor whose bytes were allocated in the arena into a neuron
// tensor owning them (no copy); anything else is copied into the arena.
at::Tensor adoptAsDevice(const at::Tensor& host, int device);
// A neuron tensor with `geometry`'s sizes/strides/offset over `storage_of`'s storage.
at::Tensor viewOnDevice(const at::Tensor& storage_of, const at::Tensor& geometry);

// ---- guard.cpp ------------------------------------------------------------
int currentDeviceIndex();
int64_t currentStreamId(int device);  // the calling thread's current stream on `device` (0: default)

}  // namespace neuron_sim
