// Adaptive eager (TORCH_NEURONX_ENABLE_CONCATENATION=1, experimental): the
// device queues eager ops and compiles each run of consecutive device ops
// between two flush points into one NEFF, launched once. The emulator still
// executes every op at once (its numerics are those of plain eager); this
// file models what the device does with them: per device, the open run (its
// length and fused signature, a hash of its ops' compile-cache signatures in
// order) and the runs closed so far. The fused signatures compiled are the
// eager compile cache's (aten/execution/compile_cache.h).
// Plain C++, no torch: the op path (aten/execution/adaptive_eager.h) feeds it.
#pragma once
#include <atomic>
#include <cstdint>
#include <vector>

namespace neuron_sim::runtime::adaptive {

// Why a run was closed: what made the host wait for, or step outside, the queue.
enum class Flush : uint8_t {
  kHostRead,       // .item(), .cpu(), printing: a device-to-host copy
  kHostWrite,      // a host-to-device copy (a DMA, not part of a NEFF)
  kSynchronize,    // torch.neuron.synchronize, stream or event synchronize
  kFallback,       // an op that runs on the CPU
  kKernelCall,     // an NKI kernel (its own NEFF)
  kCollective,     // a collective (the collective engine, not the NEFF)
  kGraph,          // a torch.compile graph launch (its own NEFF)
  kLimit,          // the run reached the longest fused launch (setMaxOps)
  kDeterministic,  // torch.use_deterministic_algorithms: no fusion
  kExplicit,       // torch_neuron_sim.adaptive_eager.flush(), switching the mode off
};
inline constexpr int kFlushReasons = 10;
const char* flushName(Flush f);

inline std::atomic<bool> g_enabled{false};
// The only check on the per-op path while the mode is off: one relaxed load.
inline bool enabled() { return g_enabled.load(std::memory_order_relaxed); }
void setEnabled(bool on);  // off: the caller closes the open runs first
void setMaxOps(uint32_t n);  // ops per fused launch at most (>= 1)
uint32_t maxOps();

// A run as it was closed. `first_op`/`first_signature` identify its first op:
// a run of one op is that op's own NEFF, compiled by the per-op cache.
struct Run {
  int device = 0;
  uint32_t ops = 0;          // 0: there was no open run
  uint64_t signature = 0;    // the fused signature (ops > 1)
  const void* first_op = nullptr;
  uint64_t first_signature = 0;
};

// An op with compile-cache signature `signature` joins `device`'s open run.
// Returns true when it opened the run (it carries the launch); `full` gets
// the previous run when the limit closed it first (ops 0 otherwise).
bool join(int device, const void* op, uint64_t signature, Run& full);
// Closes `device`'s open run (ops 0 when none was open).
Run close(int device, Flush why);
// Closes every device's open run.
std::vector<Run> closeAll(Flush why);

// Counts since the process started (or clearStats): ops that joined runs,
// launches (closed runs), fused launches (runs of 2+ ops), fused
// compilations and cache hits, and runs closed per reason.
struct Stats {
  uint64_t ops = 0, launches = 0, fused_launches = 0, fused_ops = 0, compilations = 0, cache_hits = 0;
  uint64_t flushes[kFlushReasons] = {};
};
Stats stats();
void clearStats();
void countFused(bool compiled);  // a fused run's compile-cache lookup: compiled, or a hit

}  // namespace neuron_sim::runtime::adaptive
