#include "runtime/device.h"
#include "runtime/default_device.h"

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace neuron_sim::runtime {
namespace {

std::mutex g_mu;
std::atomic<CachingAllocator*> g_arenas[kMaxDevices];  // lock-free reads on the hot path
std::atomic<bool> g_initialized{false};
// Bounds of all reserved arenas: most host pointers are rejected in two loads.
std::atomic<uintptr_t> g_lowest{UINTPTR_MAX};
std::atomic<uintptr_t> g_highest{0};
std::atomic<bool> g_bad_fork{false};
// The current device: the calling thread's choice (a device guard, set_device)
// or, for a thread that made none, the process default, which set_device also
// sets - as torch_neuronx does: a thread started after set_device(2) sees 2.
thread_local int t_current_device = -1;
std::atomic<int> g_default_device{0};

void onForkChild() {
  if (g_initialized.load()) g_bad_fork.store(true);
}

}  // namespace

int deviceCount() { return deviceTable().count(); }

void checkDevice(int index) {
  int n = deviceCount();
  if (index < 0 || index >= n)
    // The real backend's message, complete; the aten layer raises it as the
    // device does, a RuntimeError.
    throw std::out_of_range("Device index " + std::to_string(index) + " is out of range. Valid range is 0 to " +
                            std::to_string(n - 1) + " for this process");
}

CachingAllocator& allocator(int index) {
  CachingAllocator* a = g_arenas[index >= 0 && index < kMaxDevices ? index : 0].load(std::memory_order_acquire);
  if (a && index >= 0 && index < kMaxDevices) return *a;
  checkDevice(index);
  checkNotForked();
  std::lock_guard<std::mutex> g(g_mu);
  a = g_arenas[index].load();
  if (!a) {
    a = new CachingAllocator(deviceTable().hbm_per_device);  // lives for the process, like the device
    if (a->base() < g_lowest.load()) g_lowest.store(a->base());
    if (a->base() + a->capacity() > g_highest.load()) g_highest.store(a->base() + a->capacity());
    g_arenas[index].store(a, std::memory_order_release);
  }
  markInitialized();
  return *a;
}

CachingAllocator* reservedAllocator(int index) {
  return index >= 0 && index < kMaxDevices ? g_arenas[index].load(std::memory_order_acquire) : nullptr;
}

CachingAllocator* allocatorOwning(const void* ptr) {
  auto p = reinterpret_cast<uintptr_t>(ptr);
  if (p < g_lowest.load(std::memory_order_relaxed) || p >= g_highest.load(std::memory_order_relaxed)) return nullptr;
  for (int i = 0; i < kMaxDevices; ++i) {
    CachingAllocator* a = g_arenas[i].load(std::memory_order_acquire);
    if (a && a->owns(ptr)) return a;
  }
  return nullptr;
}

int currentDevice() {
  const int t = t_current_device;
  return t >= 0 ? t : g_default_device.load(std::memory_order_relaxed);
}

void setCurrentDevice(int index) {
  checkDevice(index);
  t_current_device = index;
}

void setDefaultDevice(int index) {
  checkDevice(index);
  g_default_device.store(index);
  t_current_device = index;
}

bool isInitialized() { return g_initialized.load(); }

void markInitialized() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, onForkChild); });
  g_initialized.store(true);
}

bool inBadFork() { return g_bad_fork.load(std::memory_order_relaxed); }

void checkNotForked() {
  if (inBadFork())
    throw std::runtime_error(
        "Cannot re-initialize the Neuron runtime in a forked subprocess: this process was forked after "
        "the parent used a neuron device. To use Neuron with multiprocessing, you must use the 'spawn' "
        "start method (multiprocessing.set_start_method('spawn') or torch.multiprocessing.spawn)");
}

}  // namespace neuron_sim::runtime
