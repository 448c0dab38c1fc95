// The shared-memory segments of a group whose ranks all run on one machine,
// set up through the group's store as the group is created: the agreement
// records' slots (local_exchange.h) and the point-to-point match table
// (match_table.h). Rank 0 creates each segment and names it in the store;
// each rank says whether it could map it, and the group uses it only if all
// could (a container may see another /dev/shm).
#pragma once
#include <memory>

#include "distributed/local_exchange.h"
#include "distributed/match_table.h"

namespace c10d {
class Store;
}

namespace neuron_sim::distributed {

struct SharedMemory {
  std::unique_ptr<LocalExchange> exchange;  // null: the records travel through the store
  std::shared_ptr<MatchTable> matches;      // null: sends and receives match through gloo messages
};

// Collective: every rank of the group calls it once, at the group's creation.
// `local`: every rank runs on this machine; rank 0's answer decides for all
// (NEURON_SIM_AGREEMENT=store on rank 0: no, as on several machines).
SharedMemory setUpSharedMemory(c10d::Store& store, int rank, int size, bool local);

}  // namespace neuron_sim::distributed
