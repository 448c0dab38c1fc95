// A stretch of the device timeline summed up, for the estimate and the
// migration report: modelled seconds per op and per bucket (compute- or
// memory-bound, launch overhead, fallback, transfer, collective, compile),
// each stream's busy time, and the longest events. Done here, in one pass
// over the stored events, so a long run's report never turns every event into
// a Python object. Plain C++, no torch.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/device_timeline.h"

namespace neuron_sim::runtime {

// Where an event's modelled seconds go. A native op's time splits into its
// fixed launch overhead and the rest, compute- or memory-bound by its regime;
// a fallback round trip (its copies included) is all "fallback"; host<->device
// copies are "transfer"; compilations and collectives are buckets of their own.
enum class Bucket : uint8_t { kCompute, kMemory, kFallback, kTransfer, kLaunch, kCollective, kCompile };
inline constexpr size_t kBuckets = 7;
const char* bucketName(Bucket b);
using BucketSeconds = std::array<double, kBuckets>;

struct SummaryRow {  // one (op name, event kind)
  const std::string* name = nullptr;
  EventKind kind = EventKind::kKernel;
  uint64_t count = 0;
  double seconds = 0, flops = 0, bytes = 0;
  BucketSeconds buckets{};
};

struct TimelineSummary {
  std::vector<SummaryRow> rows;  // in order of first appearance
  BucketSeconds breakdown{};
  std::map<std::pair<int, int64_t>, double> busy;  // (device, stream) -> modelled seconds
  uint64_t count = 0;
  uint64_t launches = 0;      // kernel and graph launches (a fused launch once)
  uint64_t compilations = 0;  // compile events
  // The launches adaptive eager would make of the same events: each run of
  // kernel events on a device that no copy, fallback, collective or graph
  // launch interrupts is one (docs/semantics.md, "Adaptive eager"; flush
  // points that leave no event, such as synchronize, are not seen here).
  uint64_t fused_launches = 0;
  int64_t first_start_ns = 0;        // earliest event start (0: no events)
  std::vector<DeviceEvent> longest;  // the `keep` longest events on the trace clock, in time order
};

// Events with index in [from, to) (see events()).
TimelineSummary summarize(uint64_t from, uint64_t to, size_t keep);

}  // namespace neuron_sim::runtime
