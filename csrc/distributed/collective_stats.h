// Collectives are device ops: each one is counted in op tracking under its
// c10d operator name ("c10d::allreduce_"), with the bytes it moved, and
// reported to an active migration report together with the user's source line.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace neuron_sim::distributed {

// Called on the issuing thread when a collective starts. `c10d_op` is the
// c10d operator ("c10d::allreduce_"); `bytes` the message size as nccl-tests
// counts it (docs/distributed.md).
void recordCollective(const char* c10d_op, uint64_t bytes);

struct CollectiveCount {
  std::string name;
  uint64_t calls, bytes;
};
std::vector<CollectiveCount> collectiveCounts();
void clearCollectiveCounts();

// While a migration report is active, each collective is also passed to this
// hook (Python, which records the call site).
void setCollectiveReporter(void (*report)(const std::string& name, uint64_t bytes));

}  // namespace neuron_sim::distributed
