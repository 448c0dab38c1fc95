// The op record: one entry per operator, found by the operator's address (no
// strings on the per-op path), holding what each part of the per-op path
// keeps about it - native or not, how often it ran on the device or fell
// back, its 64-bit facts and compile-cache signatures. Also the native set.
// What happens to a fallback (warn, error, report) is fallback_policy.h.
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "runtime/cost_model.h"

namespace neuron_sim {

// A native op with no CPU kernel to run on arena memory (the fused attention
// ops) has a host kernel: a boxed function run in place of the CPU redispatch.
using HostKernel = void (*)(const c10::OperatorHandle&, torch::jit::Stack*);
void registerHostKernel(const std::string& name, HostKernel kernel);  // before the op is first used
std::vector<std::string> hostKernelNames();

// The device's own argument checks for a native op, run before its kernel
// (its messages and exception types where they differ from the CPU's).
using Precondition = void (*)(const c10::OperatorHandle&, const torch::jit::Stack&);
// Also applies to an op already in use: its next call runs the check, on
// the boxed path or the fast path alike. Returns the
// check it replaces (nullptr if none), so a temporary one can be undone.
Precondition registerPrecondition(const std::string& name, Precondition check);

// How a native op checks where its tensor inputs are (tracking.rules, "inputs").
enum class InputCheck : uint8_t {
  kAll,       // every tensor that is not 0-dim must be on neuron
  kSelf,      // only the first argument (index.Tensor takes CPU indices)
  kIterator,  // TensorIterator's check and message (structured wrappers)
  kFallback,  // a tensor elsewhere sends the op to the CPU fallback
};

struct OpEntry {
  std::string name;      // "aten::add.Tensor"
  std::string base;      // "aten::add"
  std::string recorded;  // the name the device records when it runs the op ("aten::div.out" for div.Tensor)
  std::atomic<bool> native{false};
  std::atomic<bool> untracked{false};  // fallbacks never recorded (view/metadata ops, by exact name)
  std::atomic<bool> never{false};      // never recorded, executed or not (some C++ kernels of the device)
  std::atomic<InputCheck> inputs{InputCheck::kAll};
  std::atomic<uint64_t> executed{0};
  std::atomic<uint64_t> fallbacks{0};
  std::atomic<bool> announced{false};
  std::vector<size_t> generator_args;  // positions of Generator? arguments
  bool draws_host_default = false;      // random without a Generator? argument (native_dropout)
  bool in_place = false;                // writes its first argument, a Tensor (add_, index_copy_...)
  // Schema facts for the 64-bit policy, computed once by readDtypeFacts (dtype_policy.cpp).
  uint64_t written_args = 0;           // bit i: the op writes argument i (in-place self, out=)
  uint64_t dtype_arg_mask = 0;         // bit i: argument i is a ScalarType? (dtype=)
  bool may_downcast = false;           // has any Tensor, Tensor[] or dtype argument
  std::atomic<uint64_t> downcasts_f64{0};  // float64 tensors computed in float32
  std::atomic<uint64_t> downcasts_i64{0};  // int64 tensors computed in int32
  std::atomic<uint64_t> widened{0};        // calls computed in a wider dtype (dtype_widening.cpp)
  std::atomic<uint64_t> kernel_dtypes_checked{0};  // ScalarType bits the CPU kernel has been tried in
  std::atomic<uint64_t> widen_dtypes{0};           // ScalarType bits it lacks: computed wider
  uint64_t integer_math = 0;  // ScalarType bits the device computes in fp32 for this op (numerics.h)
  // The eager compile cache (compile_cache.cpp): one entry per distinct
  // (op, dtypes, shapes) signature, as the real backend compiles one NEFF each.
  std::mutex signatures_mu;
  std::unordered_set<uint64_t> signatures;
  std::atomic<uint64_t> cache_hits{0};
  // Measured only while a migration report is active (report_measures.h;
  // never cleared: the report takes differences).
  std::atomic<uint64_t> time_ns{0};       // wall time inside the op (a fallback's includes its copies)
  std::atomic<uint64_t> copy_ns{0};       // fallbacks: copies to the host and back
  std::atomic<uint64_t> copied_bytes{0};  // fallbacks: bytes of those copies
  runtime::OpFormula formula = runtime::OpFormula::kElementwise;  // how the cost model counts its work
  HostKernel host_kernel = nullptr;
  std::atomic<Precondition> precondition{nullptr};
  // Whether the unboxed fast path (fast_path.cpp) may take the op's calls:
  // native, with no host kernel (the fast path runs the CPU kernel, after the
  // precondition if any). Decided here only, by refreshFastPath, whenever one changes.
  std::atomic<bool> fast{false};
  // Whether the device compiler lowers the op, for its calls inside a compiled
  // graph's launch (graph_lowering.h): -1 not asked yet, 0 no, 1 yes. Forgotten
  // when the native set or the tracking rules change (the answer reads both).
  std::atomic<int8_t> lowered{-1};
};

OpEntry& opEntry(const c10::OperatorHandle& op);
// The entry of a kernel registered directly (not through the boxed path),
// found once: `static OpEntry& e = kernelEntry("aten::clone", "");`
OpEntry& kernelEntry(const char* name, const char* overload);
// The op ran: counted unless the tracking rules say never (the one counting rule of
// every path: finish_op.h, the direct kernels below, collectives).
inline void countOp(OpEntry& e) {
  if (!e.never.load(std::memory_order_relaxed)) e.executed.fetch_add(1, std::memory_order_relaxed);
}
// A direct kernel of the device that records its run (aten::empty, aten::clone...).
inline void recordKernelRun(OpEntry& e) { countOp(e); }

// The rules of tracking.rules: names recorded instead of the overload that
// ran, ops never recorded, fallbacks exempt from recording (exact names), and
// per-op input checks ("self", "iterator", "fallback").
struct TrackingRules {
  std::unordered_map<std::string, std::string> record;
  std::unordered_set<std::string> never, exempt;
  std::unordered_map<std::string, std::string> inputs;
};
void setTrackingRules(TrackingRules rules);

// The native set: names are "aten::add" (every overload) or "aten::add.Tensor".
void setNativeOps(const std::vector<std::string>& names);
std::vector<std::string> nativeOps();
// Exact op names whose fallbacks are never recorded.
std::vector<std::string> untrackedOpNames();

// name: the overload as called; recorded: the name the device records for
// its execution; fallbacks are recorded under `name`.
struct OpCount { std::string name, recorded; uint64_t executed, fallbacks; };
std::vector<OpCount> opCounts();
void clearOpTracking();

// Everything the migration report reads about one op.
struct OpStats {
  std::string name;
  bool native;
  uint64_t executed, fallbacks, downcasts_f64, downcasts_i64, compilations, cache_hits, widened;
  uint64_t time_ns, copy_ns, copied_bytes;
};
std::vector<OpStats> opStats();  // ops with any activity
// Runs f on every op entry, under the table's lock (for clears and sweeps).
void forEachOpEntry(void (*f)(OpEntry&));

}  // namespace neuron_sim
