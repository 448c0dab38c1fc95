// Whether a peer rank's process still exists, and a watcher that ends a store
// wait on one that has exited. A store wait cannot be interrupted and sees
// nothing of a crashed peer (a dead gloo peer shows as a closed connection).
// So each rank publishes who it is in the group's store (boot id, pid
// namespace, pid, start time: a reused pid starts later) and, once a wait has
// lasted a while, the watcher checks in /proc whether the awaited peer still
// exists; if not, it ends the wait through the store with that reason.
#pragma once
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace neuron_sim::distributed {

class PeerWatcher {
 public:
  // `store`: the exchange's own connection (the watcher clones its own from it).
  PeerWatcher(c10::intrusive_ptr<c10d::Store> store, int rank, int size);
  ~PeerWatcher();  // stops the watcher thread, if started

  // Puts this process's identity in the store; then every rank's identity,
  // waiting for each to publish: true when all run on this machine (one boot
  // id and pid namespace). Collective, at the group's creation.
  void publish();
  bool readAll();

  // The watcher thread, for waits on the store: `end_wait(probe, peer, seq,
  // reason)` ends the wait for `peer`'s record of collective `seq`, through
  // `probe`, the watcher's own connection (the exchange's is busy waiting).
  using EndWait = std::function<void(c10d::Store& probe, int peer, int64_t seq, const std::string& reason)>;
  void start(EndWait end_wait);
  // Around a store wait for `peer`'s record of collective `seq`.
  void waitingOn(int peer, int64_t seq);
  void waitOver();

  // "" while `peer` may still come, else why it never will: the reason given
  // to cancel(), or that its process has exited. Without the thread (waits in
  // shared memory ask it themselves).
  std::string gone(int peer);
  // Ends a wait in progress or to come with `reason` (the group is being destroyed).
  void cancel(const std::string& reason);
  // The exit check alone, on a copy of the identities (point-to-point waits).
  std::function<std::string(int)> liveness() const;

 private:
  void watch();
  std::string exited(int peer);  // reads a missing identity through probe_

  c10::intrusive_ptr<c10d::Store> store_;
  int rank_;
  std::vector<std::string> identity_;  // per rank, "" until read
  EndWait end_wait_;
  // The wait in progress.
  std::atomic<int> waiting_on_{-1};
  std::atomic<int64_t> waiting_seq_{-1};
  std::atomic<int64_t> waiting_since_ns_{0};
  std::atomic<bool> cancelling_{false};
  // The watcher's state, under mutex_.
  std::string cancelled_;  // why waits end at once ("" while they may run)
  c10::intrusive_ptr<c10d::Store> probe_;  // its own connection, made when first needed
  int64_t reported_seq_ = -1;
  bool stop_ = false;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace neuron_sim::distributed
