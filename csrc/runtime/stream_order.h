// Happens-before between streams, for the stream-order checker
// (torch_neuron_sim.stream_check). Kernels here finish at launch, so a
// program that uses one stream's result on another stream without a wait
// still computes the right numbers - and races on hardware. To catch that,
// each stream keeps a vector clock: for every stream, how many of its ops are
// known to precede this stream's next op. Launching an op ticks the stream's
// own entry; recording an event copies the clock; waiting on an event merges
// it; a host-side synchronize marks the work launched so far as complete.
// Off by default: when off, nothing here is called.
#pragma once
#include <cstdint>
#include <map>
#include <utility>

namespace neuron_sim::runtime {

using StreamRef = std::pair<int, int64_t>;  // (device, stream id)
using VectorClock = std::map<StreamRef, uint64_t>;

void setOrderTracking(bool on);
bool orderTracking();
void resetOrderTracking();

// A new op on `s`; returns its sequence number on `s` (1, 2, ...).
uint64_t tickStream(StreamRef s);
// Is op number `n` of stream `a` known to precede the next op on stream `b`?
bool orderedBefore(StreamRef a, uint64_t n, StreamRef b);

VectorClock clockOf(StreamRef s);
void mergeInto(StreamRef s, const VectorClock& c);  // s waits for everything c covers
void completeClock(const VectorClock& c);          // the host waited for everything c covers
void completeStream(StreamRef s);                  // the host waited for all work on s
void completeDevice(int device);                   // ... on every stream of the device (-1: all)

}  // namespace neuron_sim::runtime
