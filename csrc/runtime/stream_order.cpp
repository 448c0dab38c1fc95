#include "runtime/stream_order.h"

#include <algorithm>
#include <atomic>
#include <mutex>

namespace neuron_sim::runtime {
namespace {

std::atomic<bool> g_on{false};
std::mutex g_mu;
std::map<StreamRef, VectorClock> g_clocks;  // per stream
std::map<StreamRef, uint64_t> g_launched;   // ops launched per stream
std::map<StreamRef, uint64_t> g_completed;  // ops the host has waited for, per stream

void mergeLocked(VectorClock& into, const VectorClock& from) {
  for (const auto& [s, n] : from) into[s] = std::max(into[s], n);
}

}  // namespace

void setOrderTracking(bool on) { g_on.store(on); }
bool orderTracking() { return g_on.load(std::memory_order_relaxed); }

void resetOrderTracking() {
  std::lock_guard<std::mutex> g(g_mu);
  g_clocks.clear();
  g_launched.clear();
  g_completed.clear();
}

uint64_t tickStream(StreamRef s) {
  std::lock_guard<std::mutex> g(g_mu);
  uint64_t n = ++g_launched[s];
  g_clocks[s][s] = n;
  return n;
}

bool orderedBefore(StreamRef a, uint64_t n, StreamRef b) {
  if (a == b) return true;  // a stream runs its ops in order
  std::lock_guard<std::mutex> g(g_mu);
  auto done = g_completed.find(a);
  if (done != g_completed.end() && done->second >= n) return true;
  auto clock = g_clocks.find(b);
  if (clock == g_clocks.end()) return false;
  auto seen = clock->second.find(a);
  return seen != clock->second.end() && seen->second >= n;
}

VectorClock clockOf(StreamRef s) {
  std::lock_guard<std::mutex> g(g_mu);
  VectorClock c = g_clocks[s];
  c[s] = g_launched[s];
  return c;
}

void mergeInto(StreamRef s, const VectorClock& c) {
  std::lock_guard<std::mutex> g(g_mu);
  mergeLocked(g_clocks[s], c);
}

void completeClock(const VectorClock& c) {
  std::lock_guard<std::mutex> g(g_mu);
  mergeLocked(g_completed, c);
}

void completeStream(StreamRef s) {
  std::lock_guard<std::mutex> g(g_mu);
  g_completed[s] = std::max(g_completed[s], g_launched[s]);
}

void completeDevice(int device) {
  std::lock_guard<std::mutex> g(g_mu);
  for (const auto& [s, n] : g_launched)
    if (device < 0 || s.first == device) g_completed[s] = std::max(g_completed[s], n);
}

}  // namespace neuron_sim::runtime
