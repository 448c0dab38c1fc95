// What the Kineto session (torch_neuron_sim._kineto, its own extension so
// that USE_KINETO and the Kineto headers reach no other file) needs from the
// device timeline in torch_neuron_sim._C. _C hands this table over at import
// (torch_neuron_sim.profiler._install), as a capsule; both libraries are
// built by the same compiler with the same flags.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/device_timeline.h"

namespace neuron_sim::profiler {

struct TimelineApi {
  uint32_t version;  // kTimelineApiVersion
  void (*add_recorder)();
  void (*remove_recorder)();
  uint64_t (*event_count)();
  void (*events)(uint64_t from, uint64_t to, std::vector<runtime::DeviceEvent>* out);
  void (*push_correlation)(uint64_t id);
  void (*pop_correlation)();
};

constexpr uint32_t kTimelineApiVersion = 1;
constexpr const char* kTimelineApiCapsule = "torch_neuron_sim.TimelineApi";

}  // namespace neuron_sim::profiler
