// NEURON_SIM_PROTECT: arena pages are inaccessible (PROT_NONE) to host code,
// so a host dereference of device memory (a C extension reading data_ptr())
// faults at the bad access. Code that legitimately touches arena bytes on the
// host - every kernel, copy and .item(), and the allocator when it poisons or
// checks guard bytes - holds a HostAccess while it does.
//
// Page protection is per process, not per thread: the pages open when the
// first thread enters a HostAccess and close when the last one leaves. While
// any thread runs a kernel, host code on other threads is not caught; kernel
// worker threads (intra-op parallelism) are covered because the whole process
// has access. Memory protection keys could make this per thread, but a
// kernel's OpenMP workers would then fault, as they cannot be given the key.
#pragma once
#include <cstdint>

#include "runtime/debug_modes.h"

namespace neuron_sim::runtime {

// Called by each arena once reserved: protected at once if the mode is on.
void registerProtectedRange(uintptr_t base, uint64_t length);

class HostAccess {
 public:
  HostAccess() {
    if (__builtin_expect(debugMode(kProtect), 0)) enter();
  }
  ~HostAccess() {
    if (entered_) leave();
  }
  HostAccess(const HostAccess&) = delete;
  HostAccess& operator=(const HostAccess&) = delete;

 private:
  void enter();
  void leave();
  bool entered_ = false;
};

}  // namespace neuron_sim::runtime
