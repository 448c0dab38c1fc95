#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "aten/execution/adaptive_eager.h"

#include <ATen/Context.h>

#include "aten/execution/compile_cache.h"
#include "aten/execution/device_events.h"

namespace neuron_sim {
namespace {

thread_local bool t_continues = false;

// A closed run compiles (once per signature) and is one launch. A run of one
// op is that op's own NEFF: the per-op cache, as in plain eager.
void finishRun(const runtime::adaptive::Run& r) {
  if (r.ops == 0) return;
  if (r.ops == 1) {
    auto* e = static_cast<OpEntry*>(const_cast<void*>(r.first_op));
    if (noteOpCompiled(*e, r.first_signature) && C10_UNLIKELY(recordingEvents()))
      recordCompile(*e, r.device);
    return;
  }
  const bool compiled = noteFusedCompiled(r.signature);
  runtime::adaptive::countFused(compiled);
  if (compiled && C10_UNLIKELY(recordingEvents())) {
    static const std::string fused = "fused launch";
    recordCompile(fused, r.device);
  }
}

}  // namespace

bool joinAdaptiveRun(OpEntry& e, uint64_t signature, int device) {
  if (C10_UNLIKELY(at::globalContext().deterministicAlgorithms())) {
    t_continues = false;
    flushAdaptive(device, runtime::adaptive::Flush::kDeterministic);
    return noteOpCompiled(e, signature);
  }
  runtime::adaptive::Run full;
  t_continues = !runtime::adaptive::join(device, &e, signature, full);
  finishRun(full);  // the run the limit closed, if any
  return false;
}

bool continuesFusedLaunch() { return runtime::adaptive::enabled() && t_continues; }

void flushAdaptive(int device, runtime::adaptive::Flush why) { finishRun(runtime::adaptive::close(device, why)); }

void flushAdaptiveAll(runtime::adaptive::Flush why) {
  for (const auto& r : runtime::adaptive::closeAll(why)) finishRun(r);
}

void setAdaptiveEager(bool on) {
  if (!on) flushAdaptiveAll(runtime::adaptive::Flush::kExplicit);
  runtime::adaptive::setEnabled(on);
}

}  // namespace neuron_sim
