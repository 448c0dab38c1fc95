#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "aten/execution/compile_cache.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "aten/execution/adaptive_eager.h"

namespace neuron_sim {
namespace {

std::atomic<double> g_latency_ms{0.0};
std::atomic<uint64_t> g_generation{1};  // bumped when signatures are forgotten
std::atomic<bool> g_metrics{false};
std::atomic<uint64_t> g_compilations{0}, g_hits{0}, g_misses{0};
std::atomic<uint64_t> g_samples{0}, g_total_ns{0}, g_min_ns{UINT64_MAX}, g_max_ns{0};

void recordTime(uint64_t ns) {
  g_samples.fetch_add(1, std::memory_order_relaxed);
  g_total_ns.fetch_add(ns, std::memory_order_relaxed);
  uint64_t cur = g_min_ns.load();
  while (ns < cur && !g_min_ns.compare_exchange_weak(cur, ns)) {}
  cur = g_max_ns.load();
  while (ns > cur && !g_max_ns.compare_exchange_weak(cur, ns)) {}
}

}  // namespace

namespace {
// What this thread knows, in one thread-local object so that a call reaches
// it through one TLS lookup (in a shared library each thread_local variable
// costs a __tls_get_addr call of its own).
struct ThreadState {
  // Set while this thread runs a compiled graph (torch.compile): the graph
  // was compiled as one unit, so its ops are not eager compilations.
  bool in_graph_launch = false;
  // Signatures this thread already saw: repeats are the common case, and
  // this table answers them without taking the op's lock.
  struct Seen { const OpEntry* e; uint64_t sig, generation; };
  Seen seen[256] = {};
};
thread_local ThreadState t_state;

bool noteOpCompiled(OpEntry& e, uint64_t sig, ThreadState& state);
}  // namespace

void setInGraphLaunch(bool on) {
  if (on) flushAllPoint(runtime::adaptive::Flush::kGraph);  // the graph is a NEFF of its own
  t_state.in_graph_launch = on;
}
bool inGraphLaunch() { return t_state.in_graph_launch; }

bool noteCompiled(OpEntry& e, uint64_t sig, int device) {
  ThreadState& state = t_state;
  if (state.in_graph_launch) return false;
  if (C10_UNLIKELY(runtime::adaptive::enabled())) return joinAdaptiveRun(e, sig, device);
  return noteOpCompiled(e, sig, state);
}

namespace {
// A miss: the simulated compile latency, and the metrics.
void compiledNow() {
  const double ms = g_latency_ms.load(std::memory_order_relaxed);
  if (ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  if (g_metrics.load(std::memory_order_relaxed)) {
    g_misses.fetch_add(1, std::memory_order_relaxed);
    g_compilations.fetch_add(1, std::memory_order_relaxed);
    recordTime(static_cast<uint64_t>(ms * 1e6));
  }
}

std::mutex g_fused_mu;
std::unordered_set<uint64_t> g_fused;  // fused signatures compiled (adaptive eager)
}  // namespace

bool noteFusedCompiled(uint64_t fused_signature) {
  bool miss;
  {
    std::lock_guard<std::mutex> g(g_fused_mu);
    miss = g_fused.insert(fused_signature).second;
  }
  if (!miss) {
    if (g_metrics.load(std::memory_order_relaxed)) g_hits.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  compiledNow();
  return true;
}

namespace {
bool noteOpCompiled(OpEntry& e, uint64_t sig, ThreadState& state) {
  ThreadState::Seen& slot = state.seen[(sig ^ (sig >> 29)) & 255];
  const uint64_t generation = g_generation.load(std::memory_order_relaxed);
  bool miss;
  if (slot.e == &e && slot.sig == sig && slot.generation == generation) {
    miss = false;
  } else {
    std::lock_guard<std::mutex> g(e.signatures_mu);
    miss = e.signatures.insert(sig).second;
    slot = {&e, sig, generation};
  }
  const bool metrics = g_metrics.load(std::memory_order_relaxed);
  if (!miss) {
    e.cache_hits.fetch_add(1, std::memory_order_relaxed);
    if (metrics) g_hits.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  compiledNow();
  return true;
}
}  // namespace

bool noteOpCompiled(OpEntry& e, uint64_t sig) { return noteOpCompiled(e, sig, t_state); }

void clearCompileCache() {
  forEachOpEntry([](OpEntry& e) {
    std::lock_guard<std::mutex> g(e.signatures_mu);
    e.signatures.clear();
    e.cache_hits = 0;
  });
  g_generation.fetch_add(1);  // invalidates every thread's table of seen signatures
  std::lock_guard<std::mutex> g(g_fused_mu);
  g_fused.clear();
}

void setCompileLatencyMs(double ms) { g_latency_ms = std::max(0.0, ms); }
double compileLatencyMs() { return g_latency_ms.load(); }
void setMetricsEnabled(bool enabled) { g_metrics = enabled; }
bool metricsEnabled() { return g_metrics.load(); }

CompileMetrics compileMetrics() {
  const uint64_t samples = g_samples.load();
  return {g_compilations.load(), g_hits.load(), g_misses.load(), samples, g_total_ns.load(),
          samples ? g_min_ns.load() : 0, g_max_ns.load()};
}

void clearCompileMetrics() {
  g_compilations = g_hits = g_misses = 0;
  g_samples = g_total_ns = g_max_ns = 0;
  g_min_ns = UINT64_MAX;
}

}  // namespace neuron_sim
