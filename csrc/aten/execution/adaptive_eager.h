// The op path's side of adaptive eager (docs/semantics.md, "Adaptive eager";
// the run model is runtime/adaptive_eager.h). While the mode is on, a native
// op that succeeded joins its device's open run instead of compiling on its
// own (compile_cache.cpp calls joinAdaptiveRun where it would look the op's
// signature up); a flush point closes the run, and a closed run compiles once
// per fused signature and is one launch. The ops themselves ran at once, as
// in plain eager: numerics and op tracking do not change.
//
// Flush points call flushPoint/flushAllPoint, one relaxed load when the mode
// is off: host<->device copies and .item() (copy.cpp), synchronize
// (guard.cpp), a CPU fallback (execution.cpp), a torch.compile launch
// (compile_cache.cpp), a collective (collective_stats.cpp), an NKI kernel
// call and torch_neuron_sim.adaptive_eager.flush() (from Python).
#pragma once
#include <c10/macros/Macros.h>

#include <cstdint>

#include "aten/execution/op_table.h"
#include "runtime/adaptive_eager.h"

namespace neuron_sim {

// The op joins `device`'s open run. Returns false (nothing compiles now). In
// deterministic mode (torch.use_deterministic_algorithms) nothing fuses: the
// open run is closed and the op compiles alone, as in plain eager.
bool joinAdaptiveRun(OpEntry& e, uint64_t signature, int device);
// Did the last op this thread ran under adaptive eager continue an open run
// (so it has no launch of its own)? Read by the profiler right after.
bool continuesFusedLaunch();

void flushAdaptive(int device, runtime::adaptive::Flush why);
void flushAdaptiveAll(runtime::adaptive::Flush why);
inline void flushPoint(int device, runtime::adaptive::Flush why) {
  if (C10_UNLIKELY(runtime::adaptive::enabled())) flushAdaptive(device, why);
}
inline void flushAllPoint(runtime::adaptive::Flush why) {
  if (C10_UNLIKELY(runtime::adaptive::enabled())) flushAdaptiveAll(why);
}
// Switches the mode (TORCH_NEURONX_ENABLE_CONCATENATION); off closes the open runs.
void setAdaptiveEager(bool on);

}  // namespace neuron_sim
