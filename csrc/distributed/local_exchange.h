// The agreement exchange (collective_check.h) between ranks that all run on
// one host: one small shared-memory segment per group, a slot per rank.
// A rank writes its record into its slot and reads its peers' slots; a peer
// that has not written yet is waited for by spinning briefly (where the
// machine has a core for it), then on a futex. When the peers are already
// there this costs no system call and no thread switch; the store exchange costs three round trips to the store's
// server thread per collective (docs/distributed.md). Plain C++, no torch:
// errors are std::runtime_error whose text says what happened ("Timeout
// ...", "... has exited").
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace neuron_sim::distributed {

class LocalExchange {
 public:
  // Rank 0: a new segment under a fresh name (written to *name), or nullptr
  // when shared memory is unavailable.
  static std::unique_ptr<LocalExchange> create(int size, size_t record_slots, std::string* name);
  // The other ranks: the segment rank 0 created, or nullptr when it cannot be
  // opened here (another IPC namespace, another user).
  static std::unique_ptr<LocalExchange> open(const std::string& name, int size, size_t record_slots);

  // Removes the segment's name once every rank has it mapped: nothing is left
  // behind in /dev/shm, and the memory goes when the last rank exits.
  void unlink();

  // Every rank's record for collective number `seq` (this rank's `mine` in
  // its place). Waits at most `timeout` for each peer; every half second of
  // waiting asks `gone(peer)` whether it still may come ("" if so).
  // Publishes `mine` first unless tryExchange() has.
  std::vector<int64_t> exchange(int rank, int64_t seq, const std::vector<int64_t>& mine,
                                std::chrono::milliseconds timeout, const std::function<std::string(int)>& gone);
  // The same without waiting: publishes `mine` and fills `all` when every
  // peer's record is in already; false when one is not (exchange() then
  // waits for it). A rank publishes `seq` only once it has read every peer's
  // `seq - 1`, which the two buffers per slot rely on.
  bool tryExchange(int rank, int64_t seq, const std::vector<int64_t>& mine, std::vector<int64_t>* all);

  ~LocalExchange();
  LocalExchange(const LocalExchange&) = delete;
  LocalExchange& operator=(const LocalExchange&) = delete;

 private:
  struct Slot;
  LocalExchange(void* base, size_t bytes, std::string name, int size, size_t record_slots);
  Slot* slot(int rank) const;
  int64_t* record(int rank, int64_t seq) const;  // one of the slot's two buffers, by seq's parity
  void await(int peer, int64_t seq, std::chrono::milliseconds timeout, const std::function<std::string(int)>& gone);
  void publish(int rank, int64_t seq, const std::vector<int64_t>& mine);
  void copyIn(int peer, int64_t seq, std::vector<int64_t>& all) const;  // checks the peer is at `seq`

  void* base_;
  size_t bytes_;
  std::string name_;
  int size_;
  size_t record_slots_;
  size_t slot_bytes_;
  std::chrono::microseconds spin_;  // how long a waiter spins before it sleeps on the futex
};

}  // namespace neuron_sim::distributed
