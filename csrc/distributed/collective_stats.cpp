#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/collective_stats.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <map>
#include <mutex>

#include "aten/execution/adaptive_eager.h"
#include "aten/execution/fallback_policy.h"
#include "aten/execution/op_table.h"

namespace neuron_sim::distributed {
namespace {

std::mutex g_mu;
std::map<std::string, CollectiveCount> g_counts;
void (*g_reporter)(const std::string&, uint64_t) = nullptr;

}  // namespace

void recordCollective(const char* c10d_op, uint64_t bytes) {
  flushAllPoint(runtime::adaptive::Flush::kCollective);  // adaptive eager: the collective engine, not a NEFF
  {
    std::lock_guard<std::mutex> g(g_mu);
    auto& c = g_counts[c10d_op];
    c.name = c10d_op;
    c.calls += 1;
    c.bytes += bytes;
  }
  // Op tracking: the collective ran on the device, like a native op.
  auto op = c10::Dispatcher::singleton().findOp(c10::OperatorName(c10d_op, ""));
  if (op) countOp(opEntry(*op));
  if (g_reporter && reportActive()) g_reporter(c10d_op, bytes);
}

std::vector<CollectiveCount> collectiveCounts() {
  std::lock_guard<std::mutex> g(g_mu);
  std::vector<CollectiveCount> out;
  for (auto& [name, c] : g_counts) out.push_back(c);
  return out;
}

void clearCollectiveCounts() {
  std::lock_guard<std::mutex> g(g_mu);
  g_counts.clear();
}

void setCollectiveReporter(void (*report)(const std::string&, uint64_t)) { g_reporter = report; }

}  // namespace neuron_sim::distributed
