#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "aten/execution/report_measures.h"

#include <atomic>
#include <string_view>
#include <unordered_map>

#include "aten/execution/dtype_policy.h"
#include "runtime/device.h"

namespace neuron_sim {
namespace {
thread_local OpEntry* t_copying_fallback = nullptr;
std::atomic<uint64_t> g_copies{0}, g_copy_bytes{0}, g_copy_ns{0};
}  // namespace

FallbackCopies::FallbackCopies(OpEntry* e) : previous_(t_copying_fallback) { t_copying_fallback = e; }
FallbackCopies::~FallbackCopies() { t_copying_fallback = previous_; }

void noteHostCopy(uint64_t bytes, uint64_t ns) {
  if (OpEntry* e = t_copying_fallback) {
    e->copied_bytes.fetch_add(bytes, std::memory_order_relaxed);
    e->copy_ns.fetch_add(ns, std::memory_order_relaxed);
    return;
  }
  g_copies.fetch_add(1, std::memory_order_relaxed);
  g_copy_bytes.fetch_add(bytes, std::memory_order_relaxed);
  g_copy_ns.fetch_add(ns, std::memory_order_relaxed);
}

HostCopyStats hostCopyStats() { return {g_copies.load(), g_copy_bytes.load(), g_copy_ns.load()}; }

ReportCounters reportCounters(bool reset_peaks) {
  ReportCounters c;
  c.ops = opStats();
  c.unsupported = unsupportedHits();
  c.host_casts64 = hostCasts64();
  c.copies = hostCopyStats();
  const int n = runtime::deviceCount();
  c.allocated.assign(n, 0);
  c.peak.assign(n, 0);
  c.reserved.assign(n, 0);
  c.peak_reserved.assign(n, 0);
  for (int i = 0; i < n; ++i) {
    runtime::CachingAllocator* a = runtime::reservedAllocator(i);  // never reserves one: reading must not
    if (!a) continue;
    const runtime::AllocatorStats s = a->stats();
    c.allocated[i] = s.allocated_bytes.all.current;
    c.peak[i] = s.allocated_bytes.all.peak;
    c.reserved[i] = s.reserved_bytes.all.current;
    c.peak_reserved[i] = s.reserved_bytes.all.peak;
    if (reset_peaks) a->resetPeak();
  }
  return c;
}

std::vector<OpDelta> opDeltas(const ReportCounters& before, const ReportCounters& now) {
  std::unordered_map<std::string_view, const OpStats*> was, is;
  for (const OpStats& s : before.ops) was[s.name] = &s;
  for (const OpStats& s : now.ops) is[s.name] = &s;
  const OpStats zero{};
  std::vector<OpDelta> out;
  for (const OpStats& s : now.ops) {
    if (is[s.name] != &s) continue;  // a later entry of the same name counts
    auto it = was.find(s.name);
    const OpStats& b = it == was.end() ? zero : *it->second;
    const auto d = [](uint64_t x, uint64_t y) { return static_cast<int64_t>(x - y); };
    OpDelta o{s.name, d(s.executed, b.executed), d(s.fallbacks, b.fallbacks), d(s.downcasts_f64, b.downcasts_f64),
              d(s.downcasts_i64, b.downcasts_i64), d(s.compilations, b.compilations), d(s.cache_hits, b.cache_hits),
              d(s.time_ns, b.time_ns), d(s.copy_ns, b.copy_ns), d(s.copied_bytes, b.copied_bytes)};
    if (o.executed || o.fallbacks || o.downcasts_f64 || o.downcasts_i64 || o.compilations || o.cache_hits ||
        o.time_ns || o.copy_ns || o.copied_bytes)
      out.push_back(std::move(o));
  }
  return out;
}

}  // namespace neuron_sim
