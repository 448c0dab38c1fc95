#include "runtime/fault_injection.h"

#include <atomic>

#include "runtime/debug_modes.h"

namespace neuron_sim::runtime {
namespace {
std::atomic<int64_t> g_countdown{0};  // constant-initialised: safe during static init
}

void detail::setCountdown(int64_t n) { g_countdown.store(n > 0 ? n : 0); }

void armAllocationFailure(int64_t n) {
  detail::setCountdown(n);
  setDebugMode(kFailAlloc, n > 0);
}

int64_t allocationsUntilFailure() { return g_countdown.load(); }

bool consumeAllocation() {
  int64_t left = g_countdown.load();
  // Exactly one thread takes the count from 1 to 0: that allocation fails.
  while (left > 0 && !g_countdown.compare_exchange_weak(left, left - 1)) {}
  if (left != 1) return false;
  setDebugMode(kFailAlloc, false);
  return true;
}

}  // namespace neuron_sim::runtime
