#include "aten/memory/usage_series.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "aten/memory/memory_history.h"
#include "runtime/device.h"

namespace neuron_sim::history {

std::vector<size_t> downsample(const std::vector<double>& values, size_t limit) {
  const size_t n = values.size();
  std::vector<size_t> out;
  if (n <= limit) {
    out.resize(n);
    for (size_t i = 0; i < n; ++i) out[i] = i;
    return out;
  }
  const size_t runs = std::max<size_t>(1, limit / 4);
  const size_t run = (n + runs - 1) / runs;
  for (size_t start = 0; start < n; start += run) {
    const size_t end = std::min(n, start + run);
    size_t lo = start, hi = start;  // the first lowest and the first highest
    for (size_t i = start; i < end; ++i) {
      if (values[i] < values[lo]) lo = i;
      if (values[i] > values[hi]) hi = i;
    }
    size_t keep[4] = {start, lo, hi, end - 1};
    std::sort(keep, keep + 4);
    for (size_t k = 0; k < 4; ++k)
      if (k == 0 || keep[k] != keep[k - 1]) out.push_back(keep[k]);
  }
  return out;
}

namespace {

// One device's series; for_each(f) calls f on each of its trace entries in order.
template <class ForEach>
void addSeries(std::vector<UsageSeries>& out, size_t device, double since_us, const UsageBase& base, size_t limit,
               ForEach&& for_each) {
  auto at = [&](const std::vector<uint64_t>& v) { return device < v.size() ? static_cast<double>(v[device]) : 0.0; };
  double allocated = at(base.allocated), reserved = at(base.reserved);
  std::vector<double> seconds{0.0}, bytes{allocated}, held{reserved};
  uint64_t events = 0;
  for_each([&](const TraceEntry& e) {
    if (static_cast<double>(e.time_us) < since_us) return;
    const auto n = static_cast<double>(e.block_size);
    switch (e.action) {
      case Action::kAlloc: allocated += n; ++events; break;
      case Action::kFreeCompleted: allocated -= n; ++events; break;
      case Action::kSegmentAlloc: reserved += n; break;
      case Action::kSegmentFree: reserved -= n; break;
      default: return;
    }
    seconds.push_back((static_cast<double>(e.time_us) - since_us) / 1e6);
    bytes.push_back(allocated);
    held.push_back(reserved);
  });
  if (seconds.size() == 1) return;  // no activity on this device
  // Each series keeps its own peaks and troughs: the union of both selections.
  std::vector<size_t> kept = downsample(bytes, seconds.size() <= limit ? limit : std::max<size_t>(4, limit / 2));
  if (kept.size() < seconds.size()) {
    const std::vector<size_t> kept_reserved = downsample(held, std::max<size_t>(4, limit / 2));
    std::vector<size_t> merged;
    merged.reserve(kept.size() + kept_reserved.size());
    std::set_union(kept.begin(), kept.end(), kept_reserved.begin(), kept_reserved.end(), std::back_inserter(merged));
    kept.swap(merged);
  }
  UsageSeries s{static_cast<int>(device), events, kept.size() < seconds.size(), {}, {}, {}};
  s.seconds.reserve(kept.size());
  s.bytes.reserve(kept.size());
  s.reserved.reserve(kept.size());
  for (size_t i : kept) {
    s.seconds.push_back(std::nearbyint(seconds[i] * 1e6) / 1e6);  // to the µs: the trace's resolution
    s.bytes.push_back(static_cast<int64_t>(bytes[i]));
    s.reserved.push_back(static_cast<int64_t>(held[i]));
  }
  out.push_back(std::move(s));
}

}  // namespace

std::vector<UsageSeries> usageSince(double since_us, const UsageBase& base, size_t limit) {
  std::vector<UsageSeries> out;
  const size_t devices = static_cast<size_t>(runtime::deviceCount());
  for (size_t device = 0; device < devices; ++device)
    addSeries(out, device, since_us, base, limit,
              [&](const auto& f) { forEachTraceEntry(static_cast<int>(device), f); });
  return out;
}

std::vector<UsageSeries> usageOf(const std::vector<Trace>& traces, double since_us, const UsageBase& base,
                                 size_t limit) {
  std::vector<UsageSeries> out;
  for (size_t device = 0; device < traces.size(); ++device)
    addSeries(out, device, since_us, base, limit, [&](const auto& f) {
      for (const TraceEntry& e : traces[device]) f(e);
    });
  return out;
}

}  // namespace neuron_sim::history
