// The numbers point-to-point transfers and the ranks' agreement share, each
// defined once: a transfer's record (the words that describe a tensor, written by
// point_to_point_work.cpp, kept by the match table for the other side), and how
// often a rank that waits on a peer checks the peer is still alive (every wait alike).
#pragma once
#include <chrono>
#include <cstddef>

namespace neuron_sim::distributed {

// A record: a tensor's description and a number, as int64 words.
inline constexpr int kRecordSlots = 16;
// Waiting ranks check their peers' liveness this often: through shared memory
// (local_exchange.cpp), on the shared point-to-point path (shared_point_to_point.cpp),
// and the watcher of store waits (peer_watcher.cpp). A crashed rank fails the
// others within about two of these rather than after the group's timeout.
inline constexpr std::chrono::milliseconds kLivenessInterval{500};

static_assert(kRecordSlots >= 8, "a record holds its fields (index, kind, bytes, dtype, ndim) and some dims");

}  // namespace neuron_sim::distributed
