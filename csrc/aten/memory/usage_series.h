// HBM in use over time, per device, from the allocator's trace: allocated
// bytes (live blocks, in size classes: memory_allocated) from its allocs and
// completed frees, reserved bytes (segments: memory_reserved) from its
// segment allocs and frees. The migration report's HBM chart.
// Built and downsampled here, in one pass, so a long run's history never
// becomes one Python object per allocation. Plain C++.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "aten/memory/memory_history.h"

namespace neuron_sim::history {

struct UsageSeries {
  int device;
  uint64_t events;                 // allocs and frees in the window
  bool downsampled;                // fewer points than events + 1
  std::vector<double> seconds;     // since the window's start, to the µs
  std::vector<int64_t> bytes;      // allocated after each point's event
  std::vector<int64_t> reserved;   // reserved after each point's event
};

// Each device's allocated and reserved bytes where the series start.
struct UsageBase {
  std::vector<uint64_t> allocated, reserved;
};

// The series of every device with trace entries at or after since_us (µs
// since the Unix epoch), each starting at time 0 from `base`, with at most
// about `limit` points (downsample() of each of the two, merged).
std::vector<UsageSeries> usageSince(double since_us, const UsageBase& base, size_t limit);
// The same from traces taken out of the history (takeTraces()), one per device.
std::vector<UsageSeries> usageOf(const std::vector<Trace>& traces, double since_us, const UsageBase& base,
                                 size_t limit);

// At most `limit` points of a series: the points are cut into runs of equal
// length (so bursts of activity keep their detail) and each run keeps its
// first, lowest, highest and last points, in time order: peaks and troughs
// survive. Returns the indices kept.
std::vector<size_t> downsample(const std::vector<double>& values, size_t limit);

}  // namespace neuron_sim::history
