// Per-operator bookkeeping: is the op in the native set, how often it ran on
// the device or fell back, whether its fallback was announced. One entry per
// operator, found by the operator's address: no strings on the per-op path.
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>

#include <atomic>
#include <string>
#include <vector>

namespace neuron_sim {

struct OpEntry {
  std::string name;  // "aten::add.Tensor"
  std::string base;  // "aten::add"
  std::atomic<bool> native{false};
  std::atomic<bool> untracked{false};  // view/metadata ops the real backend never records
  std::atomic<uint64_t> executed{0};
  std::atomic<uint64_t> fallbacks{0};
  std::atomic<bool> announced{false};
  std::vector<size_t> generator_args;  // positions of Generator? arguments
};

OpEntry& opEntry(const c10::OperatorHandle& op);

// The native set: names are "aten::add" (every overload) or "aten::add.Tensor".
void setNativeOps(const std::vector<std::string>& names);
std::vector<std::string> nativeOps();

struct OpCount { std::string name; uint64_t executed, fallbacks; };
std::vector<OpCount> opCounts();
void clearOpTracking();

enum class FallbackMode { kWarn, kError };
void setFallbackMode(FallbackMode mode);
FallbackMode fallbackMode();
// Called once per fallback op with its name (the Python logger, set at import).
void setFallbackAnnouncer(void (*announce)(const std::string&));
void announceFallback(OpEntry& e);

}  // namespace neuron_sim
