#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "aten/execution/device_events.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <memory>

#include "aten/device/guard.h"
#include "aten/execution/adaptive_eager.h"
#include "aten/execution/compile_cache.h"
#include "aten/execution/dtype_policy.h"
#include "aten/neuron.h"
#include "runtime/correlation.h"

namespace neuron_sim {
namespace {

using runtime::DeviceEvent;
using runtime::EventKind;
using runtime::TensorShape;

thread_local OpRecord* t_fallback = nullptr;  // the CPU fallback running on this thread

int32_t hostThread() {
  thread_local const auto tid = static_cast<int32_t>(::syscall(SYS_gettid));  // what Kineto calls the thread
  return tid;
}

TensorShape shapeOf(const at::Tensor& t) {
  const auto sizes = t.sizes();
  return TensorShape::of(sizes.data(), sizes.size(), deviceElemBytes(t.scalar_type()), mathOf(t.scalar_type()));
}

template <class Shapes>
void addShapes(Shapes& out, const c10::IValue& v) {
  if (v.isTensor()) {
    if (v.toTensor().defined()) out.push_back(shapeOf(v.toTensor()));
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef())
      if (e.isTensor() && e.toTensor().defined()) out.push_back(shapeOf(e.toTensor()));
  }
}

void setCost(DeviceEvent& e, const runtime::Cost& c) {
  e.seconds = c.seconds;
  e.launch_seconds = c.launch_seconds;
  e.regime = c.regime;
}

}  // namespace

int deviceElemBytes(at::ScalarType s) { return static_cast<int>(c10::elementSize(computedDtype(s))); }

runtime::MathClass mathOf(at::ScalarType s) {
  if (s == at::kBFloat16 || s == at::kHalf) return runtime::MathClass::kBf16;
  if (c10::isFloat8Type(s)) return runtime::MathClass::kFp8;
  return runtime::MathClass::kFp32;
}

DeviceEvent deviceEvent(EventKind kind, const std::string* name, int device, int64_t issue_ns) {
  DeviceEvent e;
  e.kind = kind;
  e.name = name;
  e.device = device;
  e.stream = currentStreamId(device);
  e.issue_ns = issue_ns;
  e.correlation = runtime::currentCorrelation();
  e.thread = hostThread();
  return e;
}

const runtime::CostModel& eventCostModel() {
  thread_local std::shared_ptr<const runtime::CostModel> model;
  thread_local uint64_t generation = ~uint64_t{0};
  const uint64_t now = runtime::costModelGeneration();
  if (now != generation) {
    model = runtime::costModel();
    generation = now;
  }
  return *model;
}

OpRecord::OpRecord(const OpEntry& e, int device, bool fallback, int64_t issue_ns)
    : e_(e), device_(device), fallback_(fallback), issue_ns_(issue_ns ? issue_ns : runtime::wallNowNs()),
      outer_(t_fallback) {
  if (fallback_) t_fallback = this;
}

OpRecord::~OpRecord() {
  if (fallback_) t_fallback = outer_;
}

void OpRecord::input(const at::Tensor& t) {
  if (t.defined()) inputs_.push_back(shapeOf(t));
}

void OpRecord::inputs(c10::ArrayRef<c10::IValue> args) {
  for (const auto& v : args) addShapes(inputs_, v);
}

void OpRecord::finish(c10::ArrayRef<c10::IValue> results) {
  if (fallback_) t_fallback = outer_;
  const int64_t now = end_ns_ = runtime::wallNowNs();
  c10::SmallVector<TensorShape, 2> outputs;
  for (const auto& v : results) addShapes(outputs, v);
  if (!fallback_) {
    const runtime::Work w = runtime::workOf(e_.formula, {inputs_.data(), inputs_.size()},
                                            {outputs.data(), outputs.size()});
    DeviceEvent e = deviceEvent(EventKind::kKernel, &e_.name, device_, issue_ns_);
    e.host_end_ns = now;
    e.flops = w.flops;
    e.bytes = w.bytes;
    setCost(e, eventCostModel().kernel(w));
    if (C10_UNLIKELY(continuesFusedLaunch())) {  // adaptive eager: the run's launch is its first op's
      e.seconds -= e.launch_seconds;
      e.launch_seconds = 0;
      e.continues_launch = true;
    }
    runtime::addEvent(e);
    return;
  }
  // The round trip in device order: copies to the host, the host kernel
  // (measured: it runs on a host CPU on Trainium too), copies back.
  for (auto& c : pending_)
    if (c.kind == EventKind::kCopyD2H) runtime::addEvent(c);
  DeviceEvent e = deviceEvent(EventKind::kFallback, &e_.name, device_, issue_ns_);
  e.host_end_ns = now;
  e.in_fallback = true;
  e.seconds = static_cast<double>(now - issue_ns_) * 1e-9;
  e.regime = runtime::Regime::kFallback;
  for (const auto& t : outputs) e.bytes += static_cast<double>(t.numel()) * t.elem_bytes;
  runtime::addEvent(e);
  for (auto& c : pending_)
    if (c.kind != EventKind::kCopyD2H) runtime::addEvent(c);
  pending_.clear();
}

void recordCopy(const at::Tensor& src, const at::Tensor& dst, int64_t issue_ns) {
  if (inGraphLaunch()) return;  // a copy inside a compiled graph is part of its launch
  const bool from_dev = src.device().type() == kNeuron, to_dev = dst.device().type() == kNeuron;
  if (!from_dev && !to_dev) return;
  const at::Tensor& dev = to_dev ? dst : src;
  const double bytes = static_cast<double>(dev.numel()) * deviceElemBytes(dev.scalar_type());
  const EventKind kind = from_dev && to_dev ? EventKind::kCopyD2D : (to_dev ? EventKind::kCopyH2D : EventKind::kCopyD2H);
  recordTransfer(kind, (from_dev ? src : dst).device().index(), bytes, issue_ns);
}

void recordScalarRead(const at::Tensor& src, int64_t issue_ns) {
  recordTransfer(EventKind::kCopyD2H, src.device().index(), deviceElemBytes(src.scalar_type()), issue_ns);
}

void recordTransfer(EventKind kind, int device, double bytes, int64_t issue_ns) {
  static const std::string* h2d = runtime::internName("neuron memcpy HtoD");
  static const std::string* d2h = runtime::internName("neuron memcpy DtoH");
  static const std::string* d2d = runtime::internName("neuron memcpy DtoD");
  const std::string* name = kind == EventKind::kCopyD2D ? d2d : (kind == EventKind::kCopyH2D ? h2d : d2h);
  DeviceEvent e = deviceEvent(kind, name, device, issue_ns);
  e.host_end_ns = runtime::wallNowNs();
  e.bytes = bytes;
  const runtime::CostModel& model = eventCostModel();
  setCost(e, kind == EventKind::kCopyD2D ? model.deviceCopy(bytes) : model.transfer(bytes));
  if (t_fallback) {  // part of a CPU fallback's round trip: placed when it finishes
    e.in_fallback = true;
    if (kind == EventKind::kCopyD2D) e.regime = runtime::Regime::kFallback;
    t_fallback->pending_.push_back(e);
    return;
  }
  runtime::addEvent(e);
}

void recordCompile(const OpEntry& op, int device) { recordCompile(op.name, device); }

void recordCompile(const std::string& what, int device) {
  DeviceEvent e = deviceEvent(EventKind::kCompile, runtime::internName("compile " + what), device,
                              runtime::wallNowNs());
  e.host_end_ns = e.issue_ns;
  setCost(e, eventCostModel().compile());
  runtime::addEvent(e);
}

}  // namespace neuron_sim
