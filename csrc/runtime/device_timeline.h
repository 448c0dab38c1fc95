// The simulated device's timeline: every op, copy, compilation and
// collective the device would run, with start and end times from the cost
// model. Plain C++, no torch. Two clocks per (device, stream):
//   - the trace clock: an event starts when the host issued it (wall time)
//     and the stream is free, so a trace shows the device idle when the host
//     is the bottleneck;
//   - the model clock: the sum of the stream's modelled durations, as if the
//     host were never late (NEURON_SIM_TIMING=model, estimate()).
// Nothing here runs unless a consumer (a profiler session, an estimate, the
// model clock) switched it on: the op path checks one relaxed atomic.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/cost_model.h"

namespace neuron_sim::runtime {

enum class EventKind : uint8_t { kKernel, kFallback, kCopyH2D, kCopyD2H, kCopyD2D, kCompile, kCollective, kGraph };
inline const char* eventKindName(EventKind k) {
  switch (k) {
    case EventKind::kKernel: return "kernel";
    case EventKind::kFallback: return "fallback";
    case EventKind::kCopyH2D: return "copy_h2d";
    case EventKind::kCopyD2H: return "copy_d2h";
    case EventKind::kCopyD2D: return "copy_d2d";
    case EventKind::kCompile: return "compile";
    case EventKind::kCollective: return "collective";
    case EventKind::kGraph: return "graph";
  }
  return "?";
}

struct DeviceEvent {
  EventKind kind = EventKind::kKernel;
  Regime regime = Regime::kMemory;
  bool in_fallback = false;      // a copy made by a CPU fallback round trip
  bool continues_launch = false; // a kernel inside a fused launch it did not open (adaptive eager): no launch overhead
  const std::string* name = nullptr;  // interned (internName): lives as long as the process
  int device = 0;
  int64_t stream = 0;
  int64_t issue_ns = 0;          // host: when the op was issued (ns since the Unix epoch)
  int64_t host_end_ns = 0;       // host: when the call returned
  int64_t start_ns = 0, end_ns = 0;  // device, trace clock
  double seconds = 0, launch_seconds = 0;  // modelled duration, and its fixed part
  double flops = 0, bytes = 0;
  uint64_t correlation = 0;      // the profiler's id of the CPU op that issued it (0: none)
  int32_t thread = 0;            // host thread that issued it
};

// Consumers. Events are stored while any recorder is active; the clocks run
// while anything is active.
inline std::atomic<uint32_t> g_timeline_users{0};
inline bool timelineActive() { return g_timeline_users.load(std::memory_order_relaxed) != 0; }
void addRecorder();     // starts storing events
void removeRecorder();  // the last one also drops the stored events
void setModelClock(bool on);  // NEURON_SIM_TIMING=model
bool modelClockOn();

// The model used for new events (default: the machine's profile and LNC).
void setCostModel(const CostModel& m);
std::shared_ptr<const CostModel> costModel();
uint64_t costModelGeneration();  // changes whenever setCostModel installs another model

const std::string* internName(std::string_view name);

// Places `e` (with kind, name, device, stream, issue time and cost filled in)
// on its stream's clocks and stores it. Returns its index in the event log.
uint64_t addEvent(DeviceEvent e);

// Events with index in [from, to): `to` = eventCount() at the time of the call.
uint64_t eventCount();
std::vector<DeviceEvent> events(uint64_t from, uint64_t to);
// Calls f on each of those events in order, under the timeline's lock (no
// copy of the log; recording on other threads waits meanwhile).
void forEachEvent(uint64_t from, uint64_t to, const std::function<void(const DeviceEvent&)>& f);

// The model clock of a stream, in ns: the modelled busy time so far.
int64_t modelClockNs(int device, int64_t stream);

int64_t wallNowNs();  // ns since the Unix epoch (the profiler's clock)

}  // namespace neuron_sim::runtime
