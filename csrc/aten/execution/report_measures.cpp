#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "aten/execution/report_measures.h"

#include <atomic>

namespace neuron_sim {
namespace {
thread_local OpEntry* t_fallback = nullptr;
std::atomic<uint64_t> g_copies{0}, g_copy_bytes{0}, g_copy_ns{0};
}  // namespace

FallbackCopies::FallbackCopies(OpEntry* e) : previous_(t_fallback) { t_fallback = e; }
FallbackCopies::~FallbackCopies() { t_fallback = previous_; }

void noteHostCopy(uint64_t bytes, uint64_t ns) {
  if (OpEntry* e = t_fallback) {
    e->copied_bytes.fetch_add(bytes, std::memory_order_relaxed);
    e->copy_ns.fetch_add(ns, std::memory_order_relaxed);
    return;
  }
  g_copies.fetch_add(1, std::memory_order_relaxed);
  g_copy_bytes.fetch_add(bytes, std::memory_order_relaxed);
  g_copy_ns.fetch_add(ns, std::memory_order_relaxed);
}

HostCopyStats hostCopyStats() { return {g_copies.load(), g_copy_bytes.load(), g_copy_ns.load()}; }

}  // namespace neuron_sim
