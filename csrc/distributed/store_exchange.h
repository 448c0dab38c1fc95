// The agreement exchange (collective_check.h) through the group's c10d Store
// instead of a gloo all-gather. When every rank runs on one host, the
// store only sets the exchange up (shared_memory_setup.h) and the records
// travel through shared memory (local_exchange.h), which needs no round trip
// per collective; otherwise a watcher (peer_watcher.h) ends a store wait on
// a peer whose process has exited. Each rank sets its record under a key named by
// the collective's sequence number and reads every peer's; once it has read
// them, its own previous key is deleted (every peer has read it by then), so
// keys do not accumulate. The calling thread talks to the store itself; a
// gloo all-gather goes through ProcessGroupGloo's work queue and worker
// thread, which cost more thread switches and CPU per collective.
// (Not the store's queues: on torch 2.13 the libuv store leaves a woken
// queue waiter registered, so later pushes wake it spuriously and the list
// grows with every wait.)
#pragma once
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "distributed/peer_watcher.h"
#include "distributed/shared_memory_setup.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace neuron_sim::distributed {

class StoreExchange {
 public:
  // nullptr unless `store` is a TCPStore (possibly prefixed) that can be
  // cloned: the caller then agrees over gloo.
  static std::unique_ptr<StoreExchange> create(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                               std::chrono::milliseconds timeout);

  // Every rank's record, rank after rank (`mine` in this rank's place).
  // Throws c10::DistStoreError ("... Timeout") when a peer does not arrive
  // within the timeout, c10::DistNetworkError when it has exited, and
  // c10::DistBackendError when the ranks are out of step.
  std::vector<int64_t> exchange(const std::vector<int64_t>& mine) { return exchange(next(), mine); }
  // The number of the next collective: its record goes to exchange(seq, ...)
  // (or first to tryExchange), in that order of numbers.
  int64_t next();
  std::vector<int64_t> exchange(int64_t seq, const std::vector<int64_t>& mine);
  // Without waiting: true, with every rank's record in `all`, when the peers'
  // are all in already (shared memory only; the store always answers false).
  // On false this rank's record may be published already; exchange(seq, mine) completes it.
  bool tryExchange(int64_t seq, const std::vector<int64_t>& mine, std::vector<int64_t>* all);
  // Ends a wait in progress or to come with `reason` (the group is being destroyed).
  void cancel(const std::string& reason) { peers_.cancel(reason); }

  void setTimeout(std::chrono::milliseconds timeout);

  // What carries the records, for error messages: "shared memory" or "store".
  const char* transport() const { return shared_.exchange ? "shared memory" : "store"; }

  // Where point-to-point operations are matched when every rank is on this
  // machine (set up with the shared-memory exchange), else nullptr.
  std::shared_ptr<MatchTable> matchTable() const { return shared_.matches; }
  // "" while a peer may still come, else why it never will (its process has exited).
  std::function<std::string(int)> liveness() const { return peers_.liveness(); }

 private:
  StoreExchange(c10::intrusive_ptr<c10d::Store> store, int rank, int size, std::chrono::milliseconds timeout);
  std::vector<uint8_t> read(int peer, int64_t seq);

  c10::intrusive_ptr<c10d::Store> store_;  // a private connection: its timeout is the group's
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  int64_t seq_ = 0;  // collectives numbered so far; records carry it to catch ranks out of step
  std::mutex mutex_;
  SharedMemory shared_;
  PeerWatcher peers_;  // last: its thread stops before the rest goes
};

}  // namespace neuron_sim::distributed
