#include "runtime/adaptive_eager.h"

#include <algorithm>
#include <mutex>

namespace neuron_sim::runtime::adaptive {
namespace {

inline uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ULL; }  // FNV-1a over words

struct OpenRun {
  uint32_t ops = 0;
  uint64_t signature = 0xcbf29ce484222325ULL;
  const void* first_op = nullptr;
  uint64_t first_signature = 0;
};

struct State {
  std::mutex mu;
  std::vector<OpenRun> open;  // per device index
  uint32_t max_ops = 1024;
  Stats stats;
};

State& state() {
  static State* s = new State();  // leaked: used from any thread until exit
  return *s;
}

Run takeLocked(State& s, int device, Flush why) {
  Run r;
  r.device = device;
  if (device < 0 || static_cast<size_t>(device) >= s.open.size() || s.open[device].ops == 0) return r;
  OpenRun& o = s.open[device];
  r.ops = o.ops;
  r.signature = o.signature;
  r.first_op = o.first_op;
  r.first_signature = o.first_signature;
  o = OpenRun{};
  ++s.stats.launches;
  ++s.stats.flushes[static_cast<int>(why)];
  if (r.ops > 1) {
    ++s.stats.fused_launches;
    s.stats.fused_ops += r.ops;
  }
  return r;
}

}  // namespace

const char* flushName(Flush f) {
  static const char* const names[kFlushReasons] = {"host_read", "host_write", "synchronize", "fallback",
                                                    "kernel_call", "collective", "graph", "limit",
                                                    "deterministic", "explicit"};
  return names[static_cast<int>(f)];
}

void setEnabled(bool on) { g_enabled.store(on); }

void setMaxOps(uint32_t n) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  s.max_ops = std::max<uint32_t>(1, n);
}

uint32_t maxOps() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  return s.max_ops;
}

bool join(int device, const void* op, uint64_t signature, Run& full) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  if (static_cast<size_t>(device) >= s.open.size()) s.open.resize(static_cast<size_t>(device) + 1);
  full = Run{};
  if (s.open[device].ops >= s.max_ops) full = takeLocked(s, device, Flush::kLimit);
  OpenRun& o = s.open[device];
  ++s.stats.ops;
  if (o.ops++ == 0) {
    o.first_op = op;
    o.first_signature = signature;
  }
  // The run's signature: its ops' signatures in order (op order matters).
  o.signature = mix(o.signature, signature);
  return o.ops == 1;
}

Run close(int device, Flush why) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  return takeLocked(s, device, why);
}

std::vector<Run> closeAll(Flush why) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  std::vector<Run> out;
  for (size_t d = 0; d < s.open.size(); ++d)
    if (s.open[d].ops) out.push_back(takeLocked(s, static_cast<int>(d), why));
  return out;
}

void countFused(bool compiled) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  ++(compiled ? s.stats.compilations : s.stats.cache_hits);
}

Stats stats() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  return s.stats;
}

void clearStats() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  s.stats = Stats{};
}

}  // namespace neuron_sim::runtime::adaptive
