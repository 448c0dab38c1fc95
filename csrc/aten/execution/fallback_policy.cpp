#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "aten/execution/fallback_policy.h"

#include <atomic>
#include <mutex>

namespace neuron_sim {
namespace {

std::atomic<FallbackMode> g_mode{FallbackMode::kWarn};
std::atomic<bool> g_fallback_only_unimplemented{false};
void (*g_announce)(const std::string&, const char*) = nullptr;
void (*g_reporter)(const std::string&) = nullptr;
std::atomic<bool> g_report_active{false};

struct Unsupported {
  std::mutex mu;
  std::vector<std::pair<std::string, uint64_t>> hits;
};
Unsupported& unsupported() {
  static Unsupported* u = new Unsupported();  // outlives threads still running at exit
  return *u;
}

}  // namespace

void noteUnsupported(const std::string& feature) {
  Unsupported& u = unsupported();
  std::lock_guard<std::mutex> g(u.mu);
  for (auto& [name, n] : u.hits)
    if (name == feature) return void(++n);
  u.hits.emplace_back(feature, 1);
}

std::vector<std::pair<std::string, uint64_t>> unsupportedHits() {
  Unsupported& u = unsupported();
  std::lock_guard<std::mutex> g(u.mu);
  return u.hits;
}

void clearUnsupportedHits() {
  Unsupported& u = unsupported();
  std::lock_guard<std::mutex> g(u.mu);
  u.hits.clear();
}

void setFallbackReporter(void (*report)(const std::string&)) { g_reporter = report; }
void setReportActive(bool active) { g_report_active.store(active); }
bool reportActive() { return g_report_active.load(std::memory_order_relaxed); }
void reportFallback(const OpEntry& e) {
  if (g_reporter) g_reporter(e.name);
}

void setFallbackOnlyForUnimplemented(bool on) { g_fallback_only_unimplemented = on; }
bool fallbackOnlyForUnimplemented() { return g_fallback_only_unimplemented.load(std::memory_order_relaxed); }
void raiseImplementationError(const std::string& op, const std::string& message) {
  TORCH_CHECK(!fallbackOnlyForUnimplemented(), "CPU fallback disabled because "
              "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1. Operation ", op, " failed to execute on Neuron "
              "(last implementation: EmulatorKernel). Details: EmulatorKernel: ", message,
              ". Unset the variable (or set it to 0) to let failing ops fall back to CPU.");
  TORCH_CHECK(false, message);
}

void setFallbackMode(FallbackMode mode) { g_mode = mode; }
FallbackMode fallbackMode() { return g_mode.load(std::memory_order_relaxed); }
void setFallbackAnnouncer(void (*announce)(const std::string&, const char*)) { g_announce = announce; }

const char* fallbackWhyText(FallbackWhy why) {
  switch (why) {
    case FallbackWhy::kNotNative:
      return "it is not in the native-op set";
    case FallbackWhy::kHostInput:
      return "an input is a CPU tensor, and the device runs this op on device tensors only";
    case FallbackWhy::kComplex:
      return "the device computes in no complex dtype";
    case FallbackWhy::kNonContiguousWrite:
      return "the device's kernel does not write in place to a non-contiguous tensor";
    case FallbackWhy::kMemoryFormat:
      return "the device's kernel takes only the contiguous and preserve memory formats";
  }
  return "";
}

void announceFallback(OpEntry& e, FallbackWhy why) {
  if (e.announced.exchange(true)) return;
  if (g_announce) g_announce(e.name, fallbackWhyText(why));
}

void raiseFallbackDisabled(const OpEntry& e, FallbackWhy why) {
  TORCH_CHECK(false, "neuron: operator '", e.name, "' would fall back to CPU (", fallbackWhyText(why),
              "); CPU fallback is disabled by NEURON_SIM_FALLBACK=error. Unset it to allow the fallback",
              why == FallbackWhy::kNotNative
                  ? ", or rewrite the code to use ops that run natively (torch_neuron_sim.native_ops.current())."
                  : ".");
}

}  // namespace neuron_sim
