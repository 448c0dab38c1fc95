// Sends matched with receives between ranks that all run on one host,
// in a shared-memory segment per group: for each ordered pair of ranks
// (sender, receiver) a small table of the operations posted and not yet
// matched, under a process-shared lock. Whichever side of a transfer posts
// first leaves an entry (its tensor's record and a data slot); the other
// side finds it, writes its own record into it and uses that slot, so both
// post their one gloo message at once, on their own thread, and each knows
// the other's size (the first side reads the answer once its message is
// through). Matching is first come, first matched per (pair, tag), as gloo
// and MPI match. A receive from any rank takes the oldest send waiting for it
// on its tag. Plain C++, no torch.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "distributed/point_to_point_constants.h"

namespace neuron_sim::distributed {

class MatchTable {
 public:
  // A tensor's description as point_to_point.cpp writes it (dtype, shape, bytes): a record.
  static constexpr size_t kRecordWords = kRecordSlots;
  enum Side : int32_t { kSend = 1, kRecv = 2 };

  // What posting found. `matched`: the other side was there first; `other` is
  // its record and `slot` the slot it waits on. Otherwise this side is first
  // (`entry` names its place, `slot` the slot to post on), or `full` (no room).
  struct Posted {
    bool matched = false, full = false;
    int entry = -1;
    int64_t slot = 0;
    int source = -1;  // the sender (for a receive from any rank)
    int64_t other[kRecordWords] = {};
  };

  // Rank 0: a new segment under a fresh name (written to *name), or nullptr.
  static std::unique_ptr<MatchTable> create(int size, std::string* name);
  // The other ranks: rank 0's segment, or nullptr when it cannot be mapped here.
  static std::unique_ptr<MatchTable> open(const std::string& name, int size);
  void unlink();  // once every rank has it mapped
  ~MatchTable();
  MatchTable(const MatchTable&) = delete;
  MatchTable& operator=(const MatchTable&) = delete;

  // Posts a send (side kSend: `me` sends to `peer`) or a receive from a named
  // rank (kRecv: `me` receives from `peer`) on `tag`, with this side's record.
  Posted post(Side side, int me, int peer, int64_t tag, const int64_t* record);
  // A receive from any rank: the oldest send to `me` on `tag` that waits, or
  // not matched when none does (nothing is left in any table).
  Posted takeAnySend(int me, int64_t tag, const int64_t* record);
  // The first side, once its message is through (or failed): the other
  // side's record into `other` and true, or false when nobody matched the
  // entry (it is withdrawn). Frees the entry either way.
  bool settle(Side side, int me, int peer, int entry, int64_t* other);

  // Waiting for a match or room, on `me`'s doorbell: the generation to pass
  // to sleep(), read before looking; sleep returns early when it changes.
  uint32_t generation(int me) const;
  void sleep(int me, uint32_t seen, std::chrono::nanoseconds at_most);
  // Wakes `rank`'s sleepers (no system call when there are none).
  void ring(int rank);

 private:
  struct Pair;
  struct Doorbell;
  MatchTable(void* base, size_t bytes, std::string name, int size);
  Pair* pair(int sender, int receiver) const;
  Doorbell* doorbell(int rank) const;

  void* base_;
  size_t bytes_;
  std::string name_;
  int size_;
};

// The table keeps the records point_to_point_work.cpp writes, word for word.
static_assert(MatchTable::kRecordWords == static_cast<size_t>(kRecordSlots), "a match-table record is a p2p record");

}  // namespace neuron_sim::distributed
