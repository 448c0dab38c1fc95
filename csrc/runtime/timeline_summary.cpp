#include "runtime/timeline_summary.h"

#include <algorithm>
#include <queue>
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
  const std::vector<DeviceEvent> log = events(from, to);
  std::unordered_map<const std::string*, std::array<int32_t, 8>> row_of;  // name -> row index per kind, -1: none
  // A min-heap of (duration, index): its top is the shortest of the longest kept so far.
  using Kept = std::pair<int64_t, size_t>;
  std::priority_queue<Kept, std::vector<Kept>, std::greater<Kept>> longest;
  for (size_t i = 0; i < log.size(); ++i) {
    const DeviceEvent& e = log[i];
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
    if (s.count == 0 || e.start_ns < s.first_start_ns) s.first_start_ns = e.start_ns;
    ++s.count;
    const Kept item{e.end_ns - e.start_ns, i};
    if (longest.size() < keep) longest.push(item);
    else if (keep > 0 && item.first > longest.top().first) { longest.pop(); longest.push(item); }
  }
  std::vector<size_t> kept;
  kept.reserve(longest.size());
  for (; !longest.empty(); longest.pop()) kept.push_back(longest.top().second);
  std::sort(kept.begin(), kept.end(), [&](size_t a, size_t b) {
    return std::tie(log[a].start_ns, log[a].device, log[a].stream, a) <
           std::tie(log[b].start_ns, log[b].device, log[b].stream, b);
  });
  s.longest.reserve(kept.size());
  for (size_t i : kept) s.longest.push_back(log[i]);
  return s;
}

}  // namespace neuron_sim::runtime
