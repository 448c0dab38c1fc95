#include "runtime/stream.h"

#include <atomic>

#include "runtime/device_table.h"

namespace neuron_sim::runtime {

int64_t newStreamId(int device) {
  static std::atomic<int64_t> next[kMaxDevices];
  return 1 + next[device].fetch_add(1);
}

void recordEvent(Event& e) {
  e.recorded = true;
  e.when = std::chrono::steady_clock::now();
}

double elapsedMs(const Event& a, const Event& b) {
  if (a.model_ns >= 0 && b.model_ns >= 0) return static_cast<double>(b.model_ns - a.model_ns) / 1e6;
  return std::chrono::duration<double, std::milli>(b.when - a.when).count();
}

}  // namespace neuron_sim::runtime
