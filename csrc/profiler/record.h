// Recording device events from the op path (the ATen side of the profiler).
// Every entry point is guarded by recording(): one relaxed atomic load when
// no profiler, estimate or model clock is active. Events go to the
// runtime's device timeline (csrc/runtime/device_timeline.h), which the
// Kineto session (kineto_session.cpp) and torch_neuron_sim.profiler read.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string>
#include <vector>

#include "profiler/correlation.h"
#include "runtime/device_timeline.h"
#include "runtime/engine_cost.h"

namespace neuron_sim::profiler {

inline bool recording() { return runtime::timelineActive(); }

// A native op or a CPU fallback, from issue to return. Construct before the
// kernel runs (it reads the arguments), call finish() with the results.
class OpRecord {
 public:
  OpRecord(const std::string& op_name, c10::ArrayRef<c10::IValue> args, int device, bool fallback);
  ~OpRecord();  // a fallback's pending copies are dropped if finish() never ran (the op threw)
  void finish(c10::ArrayRef<c10::IValue> results);
  OpRecord(const OpRecord&) = delete;
  OpRecord& operator=(const OpRecord&) = delete;

 private:
  const std::string& name_;
  int device_;
  bool fallback_;
  int64_t issue_ns_;
  std::vector<runtime::TensorShape> inputs_;
  OpRecord* outer_;  // the fallback this one is nested in, if any
  std::vector<runtime::DeviceEvent> pending_;  // a fallback's copies, placed around its host kernel
  friend void recordTransfer(runtime::EventKind, int, double, int64_t);
};

// A copy between host and device or between devices (copy.cpp), issued at issue_ns.
void recordCopy(const at::Tensor& src, const at::Tensor& dst, int64_t issue_ns);
void recordScalarRead(const at::Tensor& src, int64_t issue_ns);  // .item()
void recordTransfer(runtime::EventKind kind, int device, double bytes, int64_t issue_ns);
// An eager compilation of a new op signature (compile_cache.cpp).
void recordCompile(const std::string& op_name, int device);

// For the other layers (collectives, torch.compile), also bound in Python
// (torch_neuron_sim.profiler.record_*). Device -1 means the current device.
void recordCollective(const std::string& name, int device, double bytes, int world_size);
void recordGraphCompile(const std::string& name, int device, double seconds /* < 0: the model's */);
void recordGraphLaunch(const std::string& name, int device, double flops, double bytes, runtime::MathClass math);
// One NKI kernel launch (torch_neuron_sim.nki), issued at issue_ns: one device
// event priced by engine_cost.h; returns that cost (recorded or not).
runtime::EngineCost recordNkiLaunch(const std::string& name, int device, int64_t issue_ns,
                                    const runtime::EngineWork& work);

// A compiled graph (torch.compile) as the model sees it: the work of each of
// its kernels, registered once when it is compiled. Each launch is then one
// device event (its ops, running inside the launch, record none of their own).
uint64_t registerGraph(const std::string& name, std::vector<runtime::Work> kernels);
void recordGraphRun(uint64_t graph, int device, int64_t issue_ns);

}  // namespace neuron_sim::profiler
