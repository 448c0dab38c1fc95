// The caching allocator as PyTorch sees it: a c10::DeviceAllocator for
// PrivateUse1 (what torch.accelerator's memory functions read), and a wrapper
// around the CPU allocator that, inside an ArenaScope, serves CPU kernels from
// the device's allocator.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/CPUAllocator.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "aten/device/guard.h"
#include "aten/memory/allocator.h"
#include "aten/memory/memory_history.h"
#include "aten/neuron.h"
#include "aten/runtime_call.h"
#include "runtime/debug_modes.h"
#include "runtime/device.h"
#include "runtime/fault_injection.h"
#include "runtime/host_access.h"

namespace neuron_sim {
namespace {

using runtime::CachingAllocator;

std::string humanBytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) { v /= 1024; ++u; }
  std::ostringstream ss;
  ss.setf(std::ios::fixed);
  ss.precision(2);
  ss << v << " " << units[u];
  return ss.str();
}

thread_local int t_arena_device = -1;
void (*g_reclaim)() = nullptr;  // set by the Python layer: gc.collect()
c10::DeleterFnPtr g_cpu_raw_deleter = nullptr;  // the wrapped CPU allocator's

void fillStat(c10::CachingDeviceAllocator::StatArray& dst, const runtime::PoolStat& src) {
  const runtime::Stat* from[] = {&src.all, &src.small, &src.large};  // StatType: aggregate, small, large
  for (size_t i = 0; i < dst.size(); ++i) {
    dst[i].current = from[i]->current;
    dst[i].peak = from[i]->peak;
    dst[i].allocated = from[i]->allocated;
    dst[i].freed = from[i]->freed;
  }
}

class NeuronAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    int dev = currentDeviceIndex();
    return allocateOn(dev, n, neuronDevice(dev));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &arenaDelete; }
  void copy_data(void* dst, const void* src, std::size_t n) const override {
    runtime::HostAccess access;  // NEURON_SIM_PROTECT: storage copies touch arena pages
    std::memcpy(dst, src, n);
  }

  bool initialized() override { return runtime::isInitialized(); }
  void emptyCache(c10::MempoolId_t) override {
    // Whole free segments go back to the arena, whose free ranges give the
    // host back their pages. Only allocators already reserved: emptying must
    // not reserve the others.
    for (int i = 0; i < runtime::deviceCount(); ++i)
      if (CachingAllocator* a = runtime::reservedAllocator(i)) {
        a->emptyCache();
        if (runtime::debugModes() & runtime::kHistory) history::recordSegments(i, *a);  // segment_free
      }
  }
  // Nothing to hold back: kernels finish at launch, so no stream has pending work on a block.
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    auto s = runtime::allocator(device).stats();
    c10::CachingDeviceAllocator::DeviceStats d;
    fillStat(d.allocated_bytes, s.allocated_bytes);
    fillStat(d.requested_bytes, s.active_bytes);
    fillStat(d.reserved_bytes, s.reserved_bytes);
    fillStat(d.active_bytes, s.active_bytes);
    fillStat(d.inactive_split_bytes, s.inactive_split_bytes);
    fillStat(d.allocation, s.allocation);
    fillStat(d.segment, s.segment);
    fillStat(d.active, s.active);
    fillStat(d.inactive_split, s.inactive_split);
    d.num_alloc_retries = s.num_alloc_retries;
    d.num_ooms = s.num_ooms;
    d.num_device_alloc = s.num_device_alloc;
    d.num_device_free = s.num_device_free;
    d.max_split_size = -1;  // as memory_stats(): no max_split_size_mb, every cached block may be split
    return d;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override { runtime::allocator(device).resetAccumulated(); }
  void resetPeakStats(c10::DeviceIndex device) override { runtime::allocator(device).resetPeak(); }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    auto& a = runtime::allocator(device);
    return {a.capacity() - a.reservedBytes(), a.capacity()};
  }
};

// Arena bytes labelled CPU: used as the allocator of host aliases, so a CPU
// kernel that resizes an out= argument grows it inside the arena.
class HostViewAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    int dev = t_arena_device >= 0 ? t_arena_device : currentDeviceIndex();
    return allocateOn(dev, n, c10::Device(c10::kCPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &arenaDelete; }
  void copy_data(void* dst, const void* src, std::size_t n) const override {
    runtime::HostAccess access;  // NEURON_SIM_PROTECT: storage copies touch arena pages
    std::memcpy(dst, src, n);
  }
};

// Wraps the CPU allocator: inside an ArenaScope on this thread, allocations
// come from the arena; everywhere else it is the CPU allocator unchanged.
class HostAllocatorWrapper final : public c10::Allocator {
 public:
  explicit HostAllocatorWrapper(c10::Allocator* cpu) : cpu_(cpu) {}
  c10::DataPtr allocate(size_t n) override {
    if (t_arena_device >= 0) return allocateOn(t_arena_device, n, c10::Device(c10::kCPU));
    return cpu_->allocate(n);
  }
  // raw_allocate/raw_deallocate (used by oneDNN) may pair an allocation made
  // inside an ArenaScope with a free made outside it: the deleter decides by
  // the pointer, not by the scope.
  c10::DeleterFnPtr raw_deleter() const override { return &rawDelete; }
  void copy_data(void* dst, const void* src, std::size_t n) const override { std::memcpy(dst, src, n); }
  c10::Allocator* wrapped() const { return cpu_; }

 private:
  static void rawDelete(void* p) {
    if (runtime::allocatorOwning(p)) arenaDelete(p);
    else g_cpu_raw_deleter(p);
  }
  c10::Allocator* cpu_;
};

NeuronAllocator g_device_allocator;
HostViewAllocator g_host_view_allocator;

}  // namespace

c10::Allocator* deviceAllocator() { return &g_device_allocator; }
c10::Allocator* hostViewAllocator() { return &g_host_view_allocator; }

namespace {

int deviceIndexOf(const CachingAllocator* a) {
  for (int i = 0; i < runtime::kMaxDevices; ++i)
    if (runtime::reservedAllocator(i) == a) return i;
  return -1;
}

// A kernel wrote outside its block. The deleter cannot throw, and the bytes it
// hit may belong to a neighbour, so stop here with everything needed to find it.
[[noreturn]] void reportGuardDamage(const CachingAllocator* a, const void* ptr, const runtime::FreedBlock& f) {
  std::ostringstream msg;
  msg << "neuron_sim: NEURON_SIM_GUARD: guard bytes of a block on neuron:" << deviceIndexOf(a)
      << " were overwritten, found when the block was freed.\n  block: " << f.requested << " bytes ("
      << humanBytes(f.requested) << ") at " << ptr << "\n  first damaged byte: ";
  if (f.first_damaged_byte >= 0)
    msg << "offset " << f.first_damaged_byte << " from the data pointer, byte "
        << (f.first_damaged_byte - static_cast<int64_t>(f.requested) + 1)
        << " past the end (an out-of-bounds write after the data)";
  else
    msg << "byte " << -f.first_damaged_byte << " before the start (an out-of-bounds write before the data)";
  msg << "\n  allocated at (most recent call last):\n" << history::allocationSite(ptr)
      << "  A kernel or a host write through data_ptr() wrote beyond this tensor. Aborting: the write may have "
         "corrupted another tensor. torch_neuron_sim.memory.check_guards() finds damage without aborting.\n";
  std::fputs(msg.str().c_str(), stderr);
  std::fflush(stderr);
  std::abort();
}

// A pointer inside a device's HBM that is no live block (a double free):
// deleters cannot throw, and carrying on would hand one block to two tensors.
[[noreturn]] void reportBadFree(const CachingAllocator* a, const void* ptr, const char* what) {
  std::fprintf(stderr, "neuron_sim: %s (%p on neuron:%d). Aborting: the block may already belong to another "
               "tensor.\n", what, ptr, deviceIndexOf(a));
  std::fflush(stderr);
  std::abort();
}

}  // namespace

void arenaDelete(void* ptr) {
  if (!ptr) return;
  CachingAllocator* a = runtime::allocatorOwning(ptr);
  if (!a) return;
  runtime::FreedBlock f;
  try {
    f = a->free(ptr);
  } catch (const std::invalid_argument& e) {
    reportBadFree(a, ptr, e.what());
  }
  if (C10_LIKELY(!runtime::debugModes())) return;
  if (f.guard_damaged) reportGuardDamage(a, ptr, f);
  if (runtime::debugModes() & (runtime::kHistory | runtime::kGuard)) history::recordFree(ptr, f.block, f.requested, f.size);
}

void rawFree(void* ptr) {
  CachingAllocator* a = ptr ? runtime::allocatorOwning(ptr) : nullptr;
  if (!a) throw std::invalid_argument("free of memory that no neuron device's allocator owns");
  runtime::FreedBlock f = a->free(ptr);  // throws for a pointer that is no live block
  if (f.guard_damaged) reportGuardDamage(a, ptr, f);
  if (runtime::debugModes() & (runtime::kHistory | runtime::kGuard)) history::recordFree(ptr, f.block, f.requested, f.size);
}

c10::DataPtr allocateOn(int device, size_t bytes, c10::Device label) {
  if (runtime::inBadFork()) runtimeCall(&runtime::checkNotForked);
  CachingAllocator* alloc = runtimeCall([&] { return &runtime::allocator(device); });
  // One relaxed load: poisoning, guards, injected failures and history all
  // live behind this word, so the common path pays nothing for them.
  const uint32_t modes = runtime::debugModes();
  const bool injected = C10_UNLIKELY(modes & runtime::kFailAlloc) && bytes > 0 && runtime::consumeAllocation();
  uintptr_t block = 0;  // where the block starts and its bytes, for the memory history
  uint64_t block_size = 0;
  // The allocator has already returned its free cached segments and retried.
  void* p = injected ? nullptr : alloc->allocate(bytes, &block, &block_size);
  if (!p && bytes > 0) {
    // Tensors kept alive only by unreachable Python reference cycles can
    // still be freed: the reclaim hook runs Python's garbage collector.
    if (injected) {
      alloc->countRequest();
    } else if (g_reclaim) {
      g_reclaim();
      p = alloc->allocate(bytes, &block, &block_size);
      if (p) alloc->countRetry();
    }
    if (!p) {
      alloc->countOom();
      const runtime::AllocatorStats s = alloc->stats();
      const uint64_t cap = alloc->capacity(), limit = alloc->limit();
      const uint64_t reserved = s.reserved_bytes.all.current, allocated = s.allocated_bytes.all.current;
      if (modes & runtime::kHistory) {
        history::recordSegments(device, *alloc);  // the cached segments the retry returned
        history::recordOom(device, bytes, limit > reserved ? limit - reserved : 0);
      }
      std::ostringstream why;
      if (injected)
        why << " This failure was injected (NEURON_SIM_FAIL_ALLOC_AT or torch_neuron_sim.inject_oom).";
      if (limit < cap)
        why << " set_per_process_memory_fraction limits this process to " << humanBytes(limit) << " (" << limit
            << " bytes) of it.";
      TORCH_CHECK_WITH(OutOfMemoryError, false,
          "neuron out of memory on neuron:", device, ". Tried to allocate ", humanBytes(bytes), " (", bytes,
          " bytes); the device has ", humanBytes(cap), " of HBM (", cap, " bytes), of which ",
          humanBytes(allocated), " is allocated by tensors, ", humanBytes(reserved - allocated),
          " is reserved by the caching allocator but unallocated, and the largest free block is ",
          humanBytes(static_cast<uint64_t>(s.largest_free_block)), ".", why.str(),
          " NRT allocation failed for size ", bytes, " (OOM). Free tensors you no longer need, "
          "lower the batch size, or model a larger device with NEURON_SIM_PROFILE / NEURON_SIM_HBM_GB.");
    }
  }
  if (C10_UNLIKELY(modes & (runtime::kHistory | runtime::kGuard)) && p) {
    if (modes & runtime::kHistory) history::recordSegments(device, *alloc);  // segment_alloc before the alloc in it
    history::recordAlloc(device, p, block, bytes, block_size);
  }
  return c10::DataPtr(p, p, &arenaDelete, label);
}

void setReclaimHook(void (*hook)()) { g_reclaim = hook; }

// The slot's address is looked up once (in a shared library each access to a
// thread_local costs a __tls_get_addr call).
ArenaScope::ArenaScope(int device) : slot_(&t_arena_device), previous_(*slot_) { *slot_ = device; }
ArenaScope::~ArenaScope() { *slot_ = previous_; }

void installHostAllocatorWrapper() {
  static HostAllocatorWrapper* wrapper = [] {
    g_cpu_raw_deleter = c10::GetCPUAllocator()->raw_deleter();
    auto* w = new HostAllocatorWrapper(c10::GetCPUAllocator());
    c10::SetAllocator(c10::kCPU, w, /*priority=*/100);
    return w;
  }();
  (void)wrapper;
}

// Registered at load: what `torch.empty(..., device="neuron")` allocates with.
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_device_allocator);

}  // namespace neuron_sim
