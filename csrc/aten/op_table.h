// Per-operator bookkeeping: is the op in the native set, how often it ran on
// the device or fell back, whether its fallback was announced. One entry per
// operator, found by the operator's address: no strings on the per-op path.
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

namespace neuron_sim {

// A native op with no CPU kernel to run on arena memory (the fused attention
// ops) has a host kernel: a boxed function run in place of the CPU redispatch.
using HostKernel = void (*)(const c10::OperatorHandle&, torch::jit::Stack*);
void registerHostKernel(const std::string& name, HostKernel kernel);  // before the op is first used

struct OpEntry {
  std::string name;  // "aten::add.Tensor"
  std::string base;  // "aten::add"
  std::atomic<bool> native{false};
  std::atomic<bool> untracked{false};  // view/metadata ops the real backend never records
  std::atomic<uint64_t> executed{0};
  std::atomic<uint64_t> fallbacks{0};
  std::atomic<bool> announced{false};
  std::vector<size_t> generator_args;  // positions of Generator? arguments
  bool draws_host_default = false;      // random without a Generator? argument (native_dropout)
  // Schema facts for the 64-bit policy, computed once (dtype_policy.cpp).
  uint64_t written_args = 0;           // bit i: the op writes argument i (in-place self, out=)
  std::vector<size_t> dtype_args;      // positions of ScalarType? arguments (dtype=)
  bool may_downcast = false;           // has any Tensor, Tensor[] or dtype argument
  std::atomic<uint64_t> downcasts_f64{0};  // float64 tensors computed in float32
  std::atomic<uint64_t> downcasts_i64{0};  // int64 tensors computed in int32
  // The eager compile cache (compile_cache.cpp): one entry per distinct
  // (op, dtypes, shapes) signature, as the real backend compiles one NEFF each.
  std::mutex signatures_mu;
  std::unordered_set<uint64_t> signatures;
  std::atomic<uint64_t> cache_hits{0};
  HostKernel host_kernel = nullptr;
};

OpEntry& opEntry(const c10::OperatorHandle& op);

// The native set: names are "aten::add" (every overload) or "aten::add.Tensor".
void setNativeOps(const std::vector<std::string>& names);
std::vector<std::string> nativeOps();
// The view/metadata op names (no namespace) whose fallbacks are never recorded.
std::vector<std::string> untrackedOpNames();

struct OpCount { std::string name; uint64_t executed, fallbacks; };
std::vector<OpCount> opCounts();
void clearOpTracking();

// Everything the migration report reads about one op.
struct OpStats {
  std::string name;
  bool native;
  uint64_t executed, fallbacks, downcasts_f64, downcasts_i64, compilations, cache_hits;
};
std::vector<OpStats> opStats();  // ops with any activity
void clearCompileCache();

// Unsupported features a program ran into (sparse, quantized, forward AD):
// counted by name so the report can list them even when the error was caught.
void noteUnsupported(const std::string& feature);
std::vector<std::pair<std::string, uint64_t>> unsupportedHits();
void clearUnsupportedHits();

// While a migration report is active, each tracked fallback is passed to the
// reporter (Python, which records the user's source line). Off: one relaxed load.
void setFallbackReporter(void (*report)(const std::string&));
void setReportActive(bool active);
bool reportActive();
void reportFallback(const OpEntry& e);

// TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1: a native op whose
// kernel fails raises "CPU fallback disabled ..." instead of retrying on CPU.
void setFallbackOnlyForUnimplemented(bool on);
bool fallbackOnlyForUnimplemented();

enum class FallbackMode { kWarn, kError };
void setFallbackMode(FallbackMode mode);
FallbackMode fallbackMode();
// Called once per fallback op with its name (the Python logger, set at import).
void setFallbackAnnouncer(void (*announce)(const std::string&));
void announceFallback(OpEntry& e);

}  // namespace neuron_sim
