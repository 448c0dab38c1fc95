// The op path's events on the simulated device's timeline
// (runtime/device_timeline.h): each native op's kernel, a CPU fallback's
// round trip, host<->device copies, .item() and eager compilations. Every
// entry point is guarded by recordingEvents(): one relaxed atomic load when
// no profiler, estimate, migration report or model clock is active. The
// Kineto session (profiler/kineto_session.cpp), torch_neuron_sim.profiler
// and the report read the timeline; the profiler's own recorders (profiler/
// record.h: collectives, compiled graphs) build on the helpers below.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/util/SmallVector.h>

#include <string>
#include <vector>

#include "aten/execution/op_table.h"
#include "runtime/cost_model.h"
#include "runtime/device_timeline.h"

namespace neuron_sim {

inline bool recordingEvents() { return runtime::timelineActive(); }

// An event of `kind` issued now or at issue_ns on `device`'s current stream,
// with the profiled CPU op's correlation id and the host thread filled in.
runtime::DeviceEvent deviceEvent(runtime::EventKind kind, const std::string* name, int device, int64_t issue_ns);
// The cost model new events are costed with (read once per thread until it changes).
const runtime::CostModel& eventCostModel();
// Bytes per element as the device stores the dtype (64-bit types in 32 bits).
int deviceElemBytes(at::ScalarType s);
runtime::MathClass mathOf(at::ScalarType s);

// A native op or a CPU fallback, from issue to return. Construct before the
// kernel runs, give it the inputs, call finish() with the results. Holds the
// input shapes inline: recording allocates nothing per op.
class OpRecord {
 public:
  // issue_ns: a clock reading already taken at the op's start (OpTimer), or 0.
  OpRecord(const OpEntry& e, int device, bool fallback, int64_t issue_ns = 0);
  ~OpRecord();  // a fallback's pending copies are dropped if finish() never ran (the op threw)
  void input(const at::Tensor& t);
  void input(const std::optional<at::Tensor>& t) {
    if (t) input(*t);
  }
  template <class T>
  void input(const T&) {}  // an argument of the fast path's that is no tensor
  void inputs(c10::ArrayRef<c10::IValue> args);
  void finish(c10::ArrayRef<c10::IValue> results);
  int64_t endNs() const { return end_ns_; }  // finish()'s clock reading
  OpRecord(const OpRecord&) = delete;
  OpRecord& operator=(const OpRecord&) = delete;

 private:
  const OpEntry& e_;
  int device_;
  bool fallback_;
  int64_t issue_ns_;
  int64_t end_ns_ = 0;
  c10::SmallVector<runtime::TensorShape, 4> inputs_;
  OpRecord* outer_;  // the fallback this one is nested in, if any
  std::vector<runtime::DeviceEvent> pending_;  // a fallback's copies, placed around its host kernel
  friend void recordTransfer(runtime::EventKind, int, double, int64_t);
};

// A copy between host and device or between devices (copy.cpp), issued at issue_ns.
void recordCopy(const at::Tensor& src, const at::Tensor& dst, int64_t issue_ns);
void recordScalarRead(const at::Tensor& src, int64_t issue_ns);  // .item()
void recordTransfer(runtime::EventKind kind, int device, double bytes, int64_t issue_ns);
// An eager compilation of a new op signature (compile_cache.h), before the op's own event.
void recordCompile(const OpEntry& e, int device);
// A compilation of something else: an adaptive-eager fused launch.
void recordCompile(const std::string& what, int device);

}  // namespace neuron_sim
