#include "runtime/host_access.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

namespace neuron_sim::runtime {
namespace {

std::mutex g_mu;
std::vector<std::pair<uintptr_t, uint64_t>> g_ranges;  // guarded by g_mu
int g_open = 0;                                         // threads inside a HostAccess
thread_local int t_depth = 0;                           // nesting on this thread

void protectAll(int prot) {
  for (auto [base, len] : g_ranges)
    if (mprotect(reinterpret_cast<void*>(base), len, prot) != 0)
      std::fprintf(stderr, "neuron_sim: NEURON_SIM_PROTECT could not mprotect an arena: %s\n",
                   std::strerror(errno));
}

}  // namespace

void registerProtectedRange(uintptr_t base, uint64_t length) {
  std::lock_guard<std::mutex> g(g_mu);
  g_ranges.emplace_back(base, length);
  if (debugMode(kProtect) && g_open == 0) mprotect(reinterpret_cast<void*>(base), length, PROT_NONE);
}

void HostAccess::enter() {
  entered_ = true;
  if (t_depth++ > 0) return;  // nested: this thread already holds access
  std::lock_guard<std::mutex> g(g_mu);
  if (g_open++ == 0) protectAll(PROT_READ | PROT_WRITE);
}

void HostAccess::leave() {
  if (--t_depth > 0) return;
  std::lock_guard<std::mutex> g(g_mu);
  if (--g_open == 0) protectAll(PROT_NONE);
}

}  // namespace neuron_sim::runtime
