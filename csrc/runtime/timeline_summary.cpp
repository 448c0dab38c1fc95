#include "runtime/timeline_summary.h"

#include <algorithm>
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
  // A min-heap of (duration, order, event): its top is the shortest of the
  // longest kept so far; only kept events are copied.
  using Kept = std::tuple<int64_t, uint64_t, DeviceEvent>;
  const auto shorter = [](const Kept& a, const Kept& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) > std::tie(std::get<0>(b), std::get<1>(b));
  };
  std::vector<Kept> longest;
  std::map<int, bool> in_run;  // device -> its last event was a kernel (a run is open)
  forEachEvent(from, to, [&](const DeviceEvent& e) {
    if (e.kind == EventKind::kKernel && !e.in_fallback) {
      bool& open = in_run[e.device];
      if (!open) ++s.fused_launches;
      open = true;
    } else if (e.kind != EventKind::kCompile) {
      in_run[e.device] = false;
    }
    auto [it, fresh] = row_of.try_emplace(e.name);
    if (fresh) it->second.fill(-1);
    int32_t& r = it->second[static_cast<size_t>(e.kind)];
    if (r < 0) {
      r = static_cast<int32_t>(s.rows.size());
      s.rows.push_back(SummaryRow{e.name, e.kind});
    }
    SummaryRow& row = s.rows[static_cast<size_t>(r)];
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
    s.busy[{e.device, e.stream}] += e.seconds;
    if ((e.kind == EventKind::kKernel && !e.continues_launch) || e.kind == EventKind::kGraph) ++s.launches;
    if (e.kind == EventKind::kCompile) ++s.compilations;
    if (s.count == 0 || e.start_ns < s.first_start_ns) s.first_start_ns = e.start_ns;
    const int64_t duration = e.end_ns - e.start_ns;
    const uint64_t order = s.count++;
    if (longest.size() < keep) {
      longest.emplace_back(duration, order, e);
      std::push_heap(longest.begin(), longest.end(), shorter);
    } else if (keep > 0 && duration > std::get<0>(longest.front())) {
      std::pop_heap(longest.begin(), longest.end(), shorter);
      longest.back() = Kept{duration, order, e};
      std::push_heap(longest.begin(), longest.end(), shorter);
    }
  });
  std::sort(longest.begin(), longest.end(), [](const Kept& a, const Kept& b) {
    const DeviceEvent &x = std::get<2>(a), &y = std::get<2>(b);
    return std::tie(x.start_ns, x.device, x.stream, std::get<1>(a)) <
           std::tie(y.start_ns, y.device, y.stream, std::get<1>(b));
  });
  s.longest.reserve(longest.size());
  for (auto& k : longest) s.longest.push_back(std::get<2>(k));
  return s;
}

}  // namespace neuron_sim::runtime
