#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "aten/execution/graph_lowering.h"

#include <atomic>

namespace neuron_sim {
namespace {
std::atomic<LoweringQuery> g_lowering_query{nullptr};
}  // namespace

void setLoweringQuery(LoweringQuery query) { g_lowering_query.store(query, std::memory_order_release); }

bool compilerLowers(OpEntry& e) {
  int8_t known = e.lowered.load(std::memory_order_relaxed);
  if (C10_UNLIKELY(known < 0)) {
    const LoweringQuery query = g_lowering_query.load(std::memory_order_acquire);
    if (query == nullptr) return false;
    known = query(e.name) ? 1 : 0;
    e.lowered.store(known, std::memory_order_relaxed);
  }
  return known == 1;
}

}  // namespace neuron_sim
