// The eager compile cache of the real backend: each native op call with a
// new (op, dtypes, shapes) signature compiles a NEFF with neuronx-cc, and a
// repeat hits the in-memory cache (facts §1c, §7). Emulated as a set of
// signature hashes per op, with the real metric names and an optional
// simulated compile latency so first-step cost is visible.
#pragma once
#include <ATen/core/ivalue.h>

#include <cstdint>

#include "op_table.h"

namespace neuron_sim {

// Looks the call's signature up; on a miss counts a compilation and waits
// the simulated compile latency. Cost of a hit: one hash over the arguments
// and one short lock. Returns true when the call compiled.
bool noteNativeCall(OpEntry& e, c10::ArrayRef<c10::IValue> args);
// While a compiled graph launches on this thread its ops are part of one
// compiled unit (torch.compile): they note no eager signatures.
void setInGraphLaunch(bool on);
bool inGraphLaunch();
// Called when signatures are cleared: invalidates the per-thread tables.
void forgetSignatures();

void setCompileLatencyMs(double ms);  // NEURON_SIM_COMPILE_MS
double compileLatencyMs();

// Process-wide metrics (torch_neuron_sim.metrics), recorded while enabled.
struct CompileMetrics {
  uint64_t total_compilations, in_memory_hits, in_memory_misses;
  uint64_t time_samples, time_total_ns, time_min_ns, time_max_ns;
};
void setMetricsEnabled(bool enabled);  // TORCH_NEURONX_METRICS_ENABLED
bool metricsEnabled();
CompileMetrics compileMetrics();
void clearCompileMetrics();

}  // namespace neuron_sim
