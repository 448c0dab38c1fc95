#include "runtime/timeline_summary.h"

#include <algorithm>
#include <functional>
#include <tuple>
#include <unordered_map>

namespace neuron_sim::runtime {
namespace {

void addBuckets(const DeviceEvent& e, BucketSeconds& b) {
  const auto at = [&](Bucket k) -> double& { return b[static_cast<size_t>(k)]; };
  if (e.kind == EventKind::kFallback || e.in_fallback) { at(Bucket::kFallback) += e.seconds; return; }
  switch (e.kind) {
    case EventKind::kCopyH2D:
    case EventKind::kCopyD2H: at(Bucket::kTransfer) += e.seconds; return;
    case EventKind::kCompile: at(Bucket::kCompile) += e.seconds; return;
    case EventKind::kCollective: at(Bucket::kCollective) += e.seconds; return;
    default:
      at(Bucket::kLaunch) += e.launch_seconds;
      at(e.regime == Regime::kCompute ? Bucket::kCompute : Bucket::kMemory) += e.seconds - e.launch_seconds;
  }
}

}  // namespace

const char* bucketName(Bucket b) {
  static const char* const names[kBuckets] = {"compute", "memory", "fallback", "transfer",
                                              "launch", "collective", "compile"};
  return names[static_cast<size_t>(b)];
}

TimelineSummary summarize(uint64_t from, uint64_t to, size_t keep) {
  TimelineSummary s;
  std::unordered_map<const std::string*, std::array<int32_t, 8>> row_of;  // name -> row index per kind, -1: none
  // The previous event's row, stream and device: a run of the same op on one
  // stream (the common case) skips the lookups.
  const std::string* last_name = nullptr;
  EventKind last_kind = EventKind::kKernel;
  int32_t last_row = -1;
  std::pair<int, int64_t> last_stream{-1, 0};
  double* busy = nullptr;
  int last_device = -1;
  bool* open_run = nullptr;
  std::map<int, bool> in_run;  // device -> its last event was a kernel (a run is open)
  // When every event is kept (a stretch of at most `keep`), they are copied
  // as they come; otherwise a min-heap of (duration, order) finds the longest
  // (its top is the shortest kept so far) and a second pass copies them.
  const bool keep_all = to - from <= keep;
  if (keep_all) s.longest.reserve(static_cast<size_t>(to - from));
  using Kept = std::pair<int64_t, uint64_t>;
  std::vector<Kept> heap;
  forEachEvent(from, to, [&](const DeviceEvent& e) {
    if (e.device != last_device) {
      last_device = e.device;
      open_run = &in_run[e.device];
    }
    if (e.kind == EventKind::kKernel && !e.in_fallback) {
      if (!*open_run) ++s.fused_launches;
      *open_run = true;
    } else if (e.kind != EventKind::kCompile) {
      *open_run = false;
    }
    if (e.name != last_name || e.kind != last_kind || last_row < 0) {
      auto [it, fresh] = row_of.try_emplace(e.name);
      if (fresh) it->second.fill(-1);
      int32_t& r = it->second[static_cast<size_t>(e.kind)];
      if (r < 0) {
        r = static_cast<int32_t>(s.rows.size());
        s.rows.push_back(SummaryRow{e.name, e.kind});
      }
      last_name = e.name;
      last_kind = e.kind;
      last_row = r;
    }
    SummaryRow& row = s.rows[static_cast<size_t>(last_row)];
    ++row.count;
    row.seconds += e.seconds;
    row.flops += e.flops;
    row.bytes += e.bytes;
    BucketSeconds b{};
    addBuckets(e, b);
    for (size_t k = 0; k < kBuckets; ++k) {
      row.buckets[k] += b[k];
      s.breakdown[k] += b[k];
    }
    if (!busy || last_stream != std::pair{e.device, e.stream}) {
      last_stream = {e.device, e.stream};
      busy = &s.busy[last_stream];  // std::map: the pointer stays valid
    }
    *busy += e.seconds;
    if ((e.kind == EventKind::kKernel && !e.continues_launch) || e.kind == EventKind::kGraph) ++s.launches;
    if (e.kind == EventKind::kCompile) ++s.compilations;
    if (s.count == 0 || e.start_ns < s.first_start_ns) s.first_start_ns = e.start_ns;
    const int64_t duration = e.end_ns - e.start_ns;
    const uint64_t order = s.count++;
    if (keep_all) {
      s.longest.push_back(e);
    } else if (heap.size() < keep) {
      heap.emplace_back(duration, order);
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    } else if (keep > 0 && duration > heap.front().first) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<>());
      heap.back() = Kept{duration, order};
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    }
  });
  if (!keep_all && !heap.empty()) {
    std::vector<uint64_t> kept;
    kept.reserve(heap.size());
    for (const Kept& k : heap) kept.push_back(k.second);
    std::sort(kept.begin(), kept.end());
    s.longest.reserve(kept.size());
    size_t next = 0;
    uint64_t order = 0;
    forEachEvent(from, to, [&](const DeviceEvent& e) {
      if (next < kept.size() && kept[next] == order++) {
        s.longest.push_back(e);
        ++next;
      }
    });
  }
  // In time order; events that start together keep their order in the log.
  const auto earlier = [](const DeviceEvent& x, const DeviceEvent& y) {
    return std::tie(x.start_ns, x.device, x.stream) < std::tie(y.start_ns, y.device, y.stream);
  };
  if (!std::is_sorted(s.longest.begin(), s.longest.end(), earlier))
    std::stable_sort(s.longest.begin(), s.longest.end(), earlier);
  return s;
}

}  // namespace neuron_sim::runtime
