// Streams and events of the simulated device. Kernels run synchronously when
// launched, so a stream is an ordering label and an event is a timestamp taken
// when it is recorded; queries and waits are then always already satisfied.
#pragma once
#include <chrono>
#include <cstdint>

#include "runtime/stream_order.h"

namespace neuron_sim::runtime {

// Stream 0 of each device is its default stream; new streams count up from 1.
// `device` must be a valid index (checkDevice).
int64_t newStreamId(int device);

struct Event {
  int device = -1;
  int64_t stream = -1;
  bool recorded = false;
  bool timing = false;  // created with enable_timing=True
  std::chrono::steady_clock::time_point when{};
  int64_t model_ns = -1;  // the stream's model clock when recorded (NEURON_SIM_TIMING=model), else -1
  VectorClock clock;  // what the event covers (stream-order checking only)
};

// Marks the event recorded at this instant: all work launched before it on
// its stream has finished, since kernels complete when launched.
void recordEvent(Event& e);

// Milliseconds from a to b, as torch.cuda.Event.elapsed_time reports: wall
// time, or the cost model's device time when both carry a model clock.
double elapsedMs(const Event& a, const Event& b);

}  // namespace neuron_sim::runtime
