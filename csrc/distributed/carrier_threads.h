// The threads that carry point-to-point operations (point_to_point.cpp): each
// waits on gloo for one operation at a time, posting its next message on the
// way. A thread that finished its operation stays parked for the next one (up
// to a few such threads, for the life of the process), so a pipeline's stream
// of sends wakes a parked thread (one switch) instead of starting one per
// operation (clone, stack, thread-locals, exit).
// No operation waits behind another: one is handed to an idle thread or a new
// one, never queued behind a busy thread, so operations posted in any order
// across ranks still never wait on each other.
#pragma once
#include <functional>

namespace neuron_sim::distributed {

// Runs `carry` on a thread of its own until it returns (a parked one when there is one).
void runOnCarrierThread(std::function<void()> carry);

}  // namespace neuron_sim::distributed
