// The eager compile cache of the real backend: each native op call with a
// new (op, dtypes, shapes) signature compiles a NEFF with neuronx-cc, and a
// repeat hits the in-memory cache (torch_neuronx.metrics counts them as
// CompilationCache.TotalCompilations / InMemoryHits / InMemoryMisses;
// docs/semantics.md, "The eager compile cache"). Emulated as a set of
// signature hashes per op, with the real metric names and an optional
// simulated compile latency so first-step cost is visible.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "aten/execution/dtype_policy.h"
#include "aten/execution/op_table.h"

namespace neuron_sim {

// A call's signature: a hash (FNV-1a over 64-bit words) of the op and what
// shapes its graph - tensor dtypes as compiled and shapes, ints, bools, absent
// arguments. Floating scalars do not: the real backend passes them as 0-d
// tensors to avoid recompiles. The call's walk (call_facts.h) feeds it each
// argument in order, before the kernel runs.
inline uint64_t signatureMix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ULL; }
inline uint64_t signatureStart(const OpEntry& e) {
  return signatureMix(0xcbf29ce484222325ULL, reinterpret_cast<uintptr_t>(&e));
}
inline uint64_t signatureTensor(uint64_t h, const at::Tensor& t) {  // t defined
  h = signatureMix(h, static_cast<uint64_t>(computedDtype(t.scalar_type())) << 8 | static_cast<uint64_t>(t.dim()));
  for (int64_t s : t.sizes()) h = signatureMix(h, static_cast<uint64_t>(s));
  return h;
}
inline uint64_t signatureUndefined(uint64_t h) { return signatureMix(h, 0xdead); }
inline uint64_t signatureInt(uint64_t h, int64_t v) { return signatureMix(h, static_cast<uint64_t>(v)); }
inline uint64_t signatureBool(uint64_t h, bool b) { return signatureMix(h, b ? 3 : 5); }
inline uint64_t signatureNone(uint64_t h) { return signatureMix(h, 7); }
// After the op succeeded on `device`: looks the signature up; on a miss
// counts a compilation and waits the simulated compile latency. Cost of a
// hit: a per-thread table lookup (a short lock the first time this thread
// sees it). Returns true when the call compiled. Under adaptive eager the op
// joins its device's open run instead and compiles nothing now
// (adaptive_eager.h): the run compiles, once per fused signature, when it is
// flushed.
bool noteCompiled(OpEntry& e, uint64_t signature, int device);
// The lookup itself, for one op's own NEFF (also a run of one op).
bool noteOpCompiled(OpEntry& e, uint64_t signature);
// A fused run's NEFF (adaptive eager): the same cache, metrics and latency,
// keyed by the run's fused signature. Returns true when it compiled.
bool noteFusedCompiled(uint64_t fused_signature);
// While a compiled graph launches on this thread its ops are part of one
// compiled unit (torch.compile): they note no eager signatures. A launch is a
// flush point of adaptive eager.
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
