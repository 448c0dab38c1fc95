// The eager compile cache of the real backend: each native op call with a
// new (op, dtypes, shapes) signature compiles a NEFF with neuronx-cc, and a
// repeat hits the in-memory cache (torch_neuronx.metrics counts them as
// CompilationCache.TotalCompilations / InMemoryHits / InMemoryMisses;
// docs/semantics.md, "The eager compile cache"). Emulated as a set of
// signature hashes per op, with the real metric names and an optional
// simulated compile latency so first-step cost is visible.
#pragma once
#include <ATen/core/ivalue.h>

#include <cstdint>

#include "aten/execution/op_table.h"

namespace neuron_sim {

// The call's signature: a hash of the op and what shapes the graph (tensor
// dtypes as compiled and shapes, ints, bools). Taken before the kernel runs,
// while the stack still holds the arguments.
uint64_t callSignature(const OpEntry& e, c10::ArrayRef<c10::IValue> args);
// After the op succeeded: looks the signature up; on a miss counts a
// compilation and waits the simulated compile latency. Cost of a hit: a
// per-thread table lookup (a short lock the first time this thread sees it).
// Returns true when the call compiled.
bool noteCompiled(OpEntry& e, uint64_t signature);
// While a compiled graph launches on this thread its ops are part of one
// compiled unit (torch.compile): they note no eager signatures.
void setInGraphLaunch(bool on);
bool inGraphLaunch();
// Forgets every signature (torch_neuron_sim.compile_cache.clear()): the next
// call of each op compiles again.
void clearCompileCache();

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
