// What the migration report measures besides counts, only while a report is
// active (otherwise one relaxed load per op): wall time inside each op, and
// host<->device copies - those a CPU fallback makes count towards its op,
// the others (.cpu(), .to(), .item()) towards the process totals.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "aten/execution/fallback_policy.h"
#include "aten/execution/op_table.h"
#include "runtime/device_timeline.h"

namespace neuron_sim {

// Adds the wall time of its scope to the op's time_ns (a fallback's time
// includes its host copies). Reads the timeline's clock (wallNowNs), so an op
// that also records a device event shares its two readings with it
// (startNs, endAt): a clock read costs about as much as the rest of the
// recording.
class OpTimer {
 public:
  explicit OpTimer(OpEntry& e) : e_(e), on_(reportActive()) {
    if (C10_UNLIKELY(on_)) start_ns_ = runtime::wallNowNs();
  }
  ~OpTimer() {
    if (C10_UNLIKELY(on_))
      e_.time_ns.fetch_add(elapsedNs(), std::memory_order_relaxed);
  }
  bool on() const { return on_; }
  void cancel() { on_ = false; }  // the call moves to another path, which times it
  int64_t startNs() const { return on_ ? start_ns_ : 0; }  // 0: not timing
  void endAt(int64_t ns) { end_ns_ = ns; }  // the op's last clock reading, already taken
  uint64_t elapsedNs() const {
    const int64_t end = end_ns_ ? end_ns_ : runtime::wallNowNs();
    return end > start_ns_ ? static_cast<uint64_t>(end - start_ns_) : 0;  // the wall clock may step back
  }
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  OpEntry& e_;
  bool on_;
  int64_t start_ns_ = 0, end_ns_ = 0;
};

// Marks the fallback running on this thread, so the copies it makes are
// charged to its op (nullptr: no report, nothing to charge).
class FallbackCopies {
 public:
  explicit FallbackCopies(OpEntry* e);
  ~FallbackCopies();
  FallbackCopies(const FallbackCopies&) = delete;
  FallbackCopies& operator=(const FallbackCopies&) = delete;

 private:
  OpEntry* previous_;
};

void noteHostCopy(uint64_t bytes, uint64_t ns);
struct HostCopyStats {
  uint64_t count, bytes, ns;
};
HostCopyStats hostCopyStats();  // copies outside fallbacks, since the process started

// Every counter the migration report reads, taken in one call when it starts
// and when it stops; the report subtracts them only when its data is read, so
// a report nobody reads builds no Python objects from them.
struct ReportCounters {
  std::vector<OpStats> ops;  // ops with any activity (opStats())
  std::vector<std::pair<std::string, uint64_t>> unsupported;
  uint64_t host_casts64 = 0;
  HostCopyStats copies{0, 0, 0};
  // Per visible device: HBM held by live tensors' blocks and its peak, and
  // that reserved by the caching allocator's segments and its peak (0 for a
  // device whose HBM was never reserved: nothing was allocated there).
  std::vector<int64_t> allocated, peak, reserved, peak_reserved;
};
// With reset_peaks, each device's peak restarts from its current use after
// it is read (a report's peaks are its own).
ReportCounters reportCounters(bool reset_peaks);

// An op's activity between two readings: `now` minus `before` per op name
// (the last entry of a name counts, as the report keys them), for the ops
// with any change. Counts are signed: clearing op tracking meanwhile gives
// negative ones, as the subtraction does in Python.
struct OpDelta {
  std::string name;
  int64_t executed, fallbacks, downcasts_f64, downcasts_i64, compilations, cache_hits;
  int64_t time_ns, copy_ns, copied_bytes;
};
std::vector<OpDelta> opDeltas(const ReportCounters& before, const ReportCounters& now);

}  // namespace neuron_sim
