// The bookkeeping after an op's kernel computed its outputs, the same on every
// path that runs one (the boxed native path, the unboxed fast path and its out=
// form): count the op unless the tracking rules say never, note its signature in
// the compile cache (or join the adaptive-eager run, compile_cache.h), and close
// its device event, the compile first when there was one. One function, so the
// paths cannot count differently. Inline: it is on the per-op path.
#pragma once
#include <ATen/core/ivalue.h>
#include <c10/macros/Macros.h>
#include <c10/util/ArrayRef.h>

#include <optional>

#include "aten/execution/call_facts.h"
#include "aten/execution/compile_cache.h"
#include "aten/execution/device_events.h"
#include "aten/execution/op_table.h"

namespace neuron_sim {

// Called once the kernel succeeded (a call that raised neither ran nor compiled).
// record: the op's device event while anything records, else empty; outputs: the
// op's results, read only to close that event.
inline void finishOp(OpEntry& e, const CallFacts& facts, std::optional<OpRecord>& record,
                     c10::ArrayRef<c10::IValue> outputs) {
  countOp(e);
  const bool compiled = noteCompiled(e, facts.signature, facts.device);
  if (C10_UNLIKELY(record)) {
    if (compiled) recordCompile(e, facts.device);  // on the timeline before the kernel's event
    record->finish(outputs);
  }
}

// The same while nothing observes ops (no device event open, no outputs to read).
inline void finishOp(OpEntry& e, const CallFacts& facts) {
  countOp(e);
  noteCompiled(e, facts.signature, facts.device);
}

}  // namespace neuron_sim
