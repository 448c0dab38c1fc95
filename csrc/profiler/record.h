// Device events from the layers above the op path: collectives (distributed/)
// and compiled graphs (torch.compile, through torch_neuron_sim.profiler's
// record_*). Each is one relaxed load when nothing records. The op path's own
// events (kernels, fallbacks, copies, eager compilations) are recorded where
// they happen, in aten/execution/device_events.h, on which these build.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cost_model.h"
#include "runtime/device_timeline.h"
#include "runtime/engine_cost.h"

namespace neuron_sim::profiler {

inline bool recording() { return runtime::timelineActive(); }

// Device -1 means the current device.
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
