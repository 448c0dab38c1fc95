#include "profiler/record.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <deque>
#include <mutex>

#include "aten/device/guard.h"
#include "aten/execution/compile_cache.h"
#include "aten/execution/dtype_policy.h"
#include "aten/neuron.h"

namespace neuron_sim::profiler {
namespace {

using runtime::DeviceEvent;
using runtime::EventKind;
using runtime::MathClass;
using runtime::TensorShape;

thread_local std::vector<uint64_t> t_correlation;
thread_local OpRecord* t_fallback = nullptr;  // the CPU fallback running on this thread

int32_t hostThread() {
  thread_local const auto tid = static_cast<int32_t>(::syscall(SYS_gettid));  // what Kineto calls the thread
  return tid;
}

// 64-bit types are computed and stored in 32 bits on the device (docs/semantics.md).
int deviceElemBytes(at::ScalarType s) {
  const int n = static_cast<int>(c10::elementSize(s));
  return (n == 8 && !c10::isComplexType(s) && dtypePolicy() == DtypePolicy::kTrainium) ? 4 : n;
}

MathClass mathOf(at::ScalarType s) {
  if (s == at::kBFloat16 || s == at::kHalf) return MathClass::kBf16;
  if (c10::isFloat8Type(s)) return MathClass::kFp8;
  return MathClass::kFp32;
}

void addShape(std::vector<TensorShape>& out, const at::Tensor& t) {
  if (!t.defined()) return;
  TensorShape s;
  s.sizes.assign(t.sizes().begin(), t.sizes().end());
  s.elem_bytes = deviceElemBytes(t.scalar_type());
  s.math = mathOf(t.scalar_type());
  out.push_back(std::move(s));
}

void addShapes(std::vector<TensorShape>& out, const c10::IValue& v) {
  if (v.isTensor()) {
    addShape(out, v.toTensor());
  } else if (v.isTensorList() || v.isList()) {
    for (const c10::IValue& e : v.toListRef())
      if (e.isTensor()) addShape(out, e.toTensor());
  }
}

int64_t streamOf(int device) { return currentStreamId(device); }

int resolveDevice(int device) { return device >= 0 ? device : currentDeviceIndex(); }

DeviceEvent baseEvent(EventKind kind, const std::string* name, int device, int64_t issue_ns) {
  DeviceEvent e;
  e.kind = kind;
  e.name = name;
  e.device = device;
  e.stream = streamOf(device);
  e.issue_ns = issue_ns;
  e.correlation = currentCorrelation();
  e.thread = hostThread();
  return e;
}

void setCost(DeviceEvent& e, const runtime::Cost& c) {
  e.seconds = c.seconds;
  e.launch_seconds = c.launch_seconds;
  e.regime = c.regime;
}

}  // namespace

void pushCorrelation(uint64_t id) { t_correlation.push_back(id); }
void popCorrelation() {
  if (!t_correlation.empty()) t_correlation.pop_back();
}
uint64_t currentCorrelation() { return t_correlation.empty() ? 0 : t_correlation.back(); }

OpRecord::OpRecord(const std::string& op_name, c10::ArrayRef<c10::IValue> args, int device, bool fallback)
    : name_(op_name), device_(device), fallback_(fallback), issue_ns_(runtime::wallNowNs()), outer_(t_fallback) {
  for (const auto& v : args) addShapes(inputs_, v);
  if (fallback_) t_fallback = this;
}

OpRecord::~OpRecord() {
  if (fallback_) t_fallback = outer_;
}

void OpRecord::finish(c10::ArrayRef<c10::IValue> results) {
  if (fallback_) t_fallback = outer_;
  const int64_t now = runtime::wallNowNs();
  auto model = runtime::costModel();
  if (!fallback_) {
    std::vector<TensorShape> outputs;
    for (const auto& v : results) addShapes(outputs, v);
    const runtime::Work w = runtime::workOf(runtime::formulaOf(name_), inputs_, outputs);
    DeviceEvent e = baseEvent(EventKind::kKernel, &name_, device_, issue_ns_);
    e.host_end_ns = now;
    e.flops = w.flops;
    e.bytes = w.bytes;
    setCost(e, model->kernel(w));
    runtime::addEvent(e);
    return;
  }
  // The round trip in device order: copies to the host, the host kernel
  // (measured: it runs on a host CPU on Trainium too), copies back.
  for (auto& c : pending_)
    if (c.kind == EventKind::kCopyD2H) runtime::addEvent(c);
  DeviceEvent e = baseEvent(EventKind::kFallback, &name_, device_, issue_ns_);
  e.host_end_ns = now;
  e.in_fallback = true;
  e.seconds = static_cast<double>(now - issue_ns_) * 1e-9;
  e.regime = runtime::Regime::kFallback;
  for (const auto& v : results) {
    std::vector<TensorShape> outputs;
    addShapes(outputs, v);
    for (const auto& t : outputs) e.bytes += static_cast<double>(t.numel()) * t.elem_bytes;
  }
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
  DeviceEvent e = baseEvent(kind, name, device, issue_ns);
  e.host_end_ns = runtime::wallNowNs();
  e.bytes = bytes;
  auto model = runtime::costModel();
  setCost(e, kind == EventKind::kCopyD2D ? model->deviceCopy(bytes) : model->transfer(bytes));
  if (t_fallback) {  // part of a CPU fallback's round trip: placed when it finishes
    e.in_fallback = true;
    if (kind == EventKind::kCopyD2D) e.regime = runtime::Regime::kFallback;
    t_fallback->pending_.push_back(e);
    return;
  }
  runtime::addEvent(e);
}

void recordCompile(const std::string& op_name, int device) {
  DeviceEvent e = baseEvent(EventKind::kCompile, runtime::internName("compile " + op_name), device,
                            runtime::wallNowNs());
  e.host_end_ns = e.issue_ns;
  setCost(e, runtime::costModel()->compile());
  runtime::addEvent(e);
}

void recordCollective(const std::string& name, int device, double bytes, int world_size) {
  if (!recording()) return;
  device = resolveDevice(device);
  DeviceEvent e = baseEvent(EventKind::kCollective, runtime::internName(name), device, runtime::wallNowNs());
  e.host_end_ns = e.issue_ns;
  e.bytes = bytes;
  setCost(e, runtime::costModel()->collective(name, bytes, world_size));
  runtime::addEvent(e);
}

void recordGraphCompile(const std::string& name, int device, double seconds) {
  if (!recording()) return;
  device = resolveDevice(device);
  DeviceEvent e = baseEvent(EventKind::kCompile, runtime::internName(name), device, runtime::wallNowNs());
  e.host_end_ns = e.issue_ns;
  setCost(e, runtime::costModel()->compile());
  if (seconds >= 0) e.seconds = seconds;
  runtime::addEvent(e);
}

void recordGraphLaunch(const std::string& name, int device, double flops, double bytes, MathClass math) {
  if (!recording()) return;
  device = resolveDevice(device);
  DeviceEvent e = baseEvent(EventKind::kGraph, runtime::internName(name), device, runtime::wallNowNs());
  e.host_end_ns = e.issue_ns;
  e.flops = flops;
  e.bytes = bytes;
  setCost(e, runtime::costModel()->graph(runtime::Work{flops, bytes, math}));
  runtime::addEvent(e);
}

runtime::EngineCost recordNkiLaunch(const std::string& name, int device, int64_t issue_ns,
                                    const runtime::EngineWork& work) {
  const auto model = runtime::costModel();
  const runtime::EngineCost cost = runtime::engineCost(*model, work);
  if (!recording()) return cost;
  device = resolveDevice(device);
  DeviceEvent e = baseEvent(EventKind::kKernel, runtime::internName(name), device, issue_ns);
  e.host_end_ns = runtime::wallNowNs();
  e.flops = work.flops[0] + work.flops[1] + work.flops[2];
  e.bytes = work.dma_bytes;
  setCost(e, cost.total);
  runtime::addEvent(e);
  return cost;
}

namespace {
struct GraphWork {
  const std::string* name;
  std::vector<runtime::Work> kernels;
};
std::mutex g_graphs_mu;
std::deque<GraphWork> g_graphs;  // a compiled graph lives as long as the process may launch it
}  // namespace

uint64_t registerGraph(const std::string& name, std::vector<runtime::Work> kernels) {
  std::lock_guard<std::mutex> g(g_graphs_mu);
  g_graphs.push_back({runtime::internName(name), std::move(kernels)});
  return g_graphs.size() - 1;
}

void recordGraphRun(uint64_t graph, int device, int64_t issue_ns) {
  if (!recording()) return;
  const GraphWork* work;
  {
    std::lock_guard<std::mutex> g(g_graphs_mu);
    if (graph >= g_graphs.size()) throw std::out_of_range("no compiled graph registered as " + std::to_string(graph));
    work = &g_graphs[graph];  // deque: elements never move
  }
  device = resolveDevice(device);
  DeviceEvent e = baseEvent(EventKind::kGraph, work->name, device, issue_ns);
  e.host_end_ns = runtime::wallNowNs();
  for (const auto& k : work->kernels) {
    e.flops += k.flops;
    e.bytes += k.bytes;
  }
  setCost(e, runtime::costModel()->graph(work->kernels));
  runtime::addEvent(e);
}

}  // namespace neuron_sim::profiler
