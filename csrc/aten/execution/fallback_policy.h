// What happens when an op leaves the device, and what the user is told:
// the fallback mode (warn or error), the one-time announcement of each
// fallback op, the migration report's reporter, the fallback-only-for-
// unimplemented flag, and the unsupported features a program ran into.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "aten/execution/op_table.h"

namespace neuron_sim {

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
// The device's implementation of `op` failed with `message`: the user sees
// that message (a RuntimeError), wrapped in the "CPU fallback disabled ..."
// error while the variable above is set. For kernels whose own checks fail
// the way the device's do (device_checks.cpp, memory_formats.cpp).
[[noreturn]] void raiseImplementationError(const std::string& op, const std::string& message);

enum class FallbackMode { kWarn, kError };
void setFallbackMode(FallbackMode mode);
FallbackMode fallbackMode();
// Why a call left the device: an op outside the native-op set, or a native
// op whose call the device's kernel does not take.
enum class FallbackWhy : uint8_t { kNotNative, kHostInput, kComplex, kNonContiguousWrite, kMemoryFormat };
const char* fallbackWhyText(FallbackWhy why);
// Called once per fallback op with its name and the reason of its first
// fallback (the Python logger, set at import).
void setFallbackAnnouncer(void (*announce)(const std::string&, const char*));
void announceFallback(OpEntry& e, FallbackWhy why);
// NEURON_SIM_FALLBACK=error: the error a fallback raises instead.
[[noreturn]] void raiseFallbackDisabled(const OpEntry& e, FallbackWhy why);

}  // namespace neuron_sim
