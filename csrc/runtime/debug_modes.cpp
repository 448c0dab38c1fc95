#include "runtime/debug_modes.h"

#include <cstdlib>
#include <cstring>

#include "runtime/environment.h"
#include "runtime/fault_injection.h"

namespace neuron_sim::runtime {
namespace {

uint32_t fromEnvironment() {
  uint32_t m = 0;
  if (envFlag("NEURON_SIM_POISON")) m |= kPoison;
  if (envFlag("NEURON_SIM_GUARD")) m |= kGuard;
  if (envFlag("NEURON_SIM_PROTECT")) m |= kProtect;
  if (const std::string v = envValue("NEURON_SIM_FAIL_ALLOC_AT"); !v.empty()) {
    long long n = std::atoll(v.c_str());
    if (n > 0) {
      detail::setCountdown(n);
      m |= kFailAlloc;
    }
  }
  return m;
}

}  // namespace

namespace detail {
std::atomic<uint32_t> g_debug_modes{fromEnvironment()};
}

void setDebugMode(DebugMode m, bool on) {
  if (on) detail::g_debug_modes.fetch_or(m, std::memory_order_relaxed);
  else detail::g_debug_modes.fetch_and(~static_cast<uint32_t>(m), std::memory_order_relaxed);
}

}  // namespace neuron_sim::runtime
