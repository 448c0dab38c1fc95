#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "profiler/record.h"

#include <deque>
#include <mutex>
#include <stdexcept>

#include "aten/device/guard.h"
#include "aten/execution/device_events.h"

namespace neuron_sim::profiler {
namespace {

using runtime::DeviceEvent;
using runtime::EventKind;

int resolveDevice(int device) { return device >= 0 ? device : currentDeviceIndex(); }

void setCost(DeviceEvent& e, const runtime::Cost& c) {
  e.seconds = c.seconds;
  e.launch_seconds = c.launch_seconds;
  e.regime = c.regime;
}

}  // namespace

void recordCollective(const std::string& name, int device, double bytes, int world_size) {
  if (!recording()) return;
  device = resolveDevice(device);
  DeviceEvent e = deviceEvent(EventKind::kCollective, runtime::internName(name), device, runtime::wallNowNs());
  e.host_end_ns = e.issue_ns;
  e.bytes = bytes;
  setCost(e, eventCostModel().collective(name, bytes, world_size));
  runtime::addEvent(e);
}

void recordGraphCompile(const std::string& name, int device, double seconds) {
  if (!recording()) return;
  device = resolveDevice(device);
  DeviceEvent e = deviceEvent(EventKind::kCompile, runtime::internName(name), device, runtime::wallNowNs());
  e.host_end_ns = e.issue_ns;
  setCost(e, eventCostModel().compile());
  if (seconds >= 0) e.seconds = seconds;
  runtime::addEvent(e);
}

void recordGraphLaunch(const std::string& name, int device, double flops, double bytes, runtime::MathClass math) {
  if (!recording()) return;
  device = resolveDevice(device);
  DeviceEvent e = deviceEvent(EventKind::kGraph, runtime::internName(name), device, runtime::wallNowNs());
  e.host_end_ns = e.issue_ns;
  e.flops = flops;
  e.bytes = bytes;
  setCost(e, eventCostModel().graph(runtime::Work{flops, bytes, math}));
  runtime::addEvent(e);
}

runtime::EngineCost recordNkiLaunch(const std::string& name, int device, int64_t issue_ns,
                                    const runtime::EngineWork& work) {
  const auto model = runtime::costModel();
  const runtime::EngineCost cost = runtime::engineCost(*model, work);
  if (!recording()) return cost;
  device = resolveDevice(device);
  DeviceEvent e = deviceEvent(EventKind::kKernel, runtime::internName(name), device, issue_ns);
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
  DeviceEvent e = deviceEvent(EventKind::kGraph, work->name, device, issue_ns);
  e.host_end_ns = runtime::wallNowNs();
  for (const auto& k : work->kernels) {
    e.flops += k.flops;
    e.bytes += k.bytes;
  }
  setCost(e, eventCostModel().graph(work->kernels));
  runtime::addEvent(e);
}

}  // namespace neuron_sim::profiler
