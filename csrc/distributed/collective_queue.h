// The collectives of one process group that could not be agreed on at once:
// an async collective whose peers have not published their records yet is
// queued here, and one worker thread per group completes the agreement and
// hands it to gloo, first in, first out, so every rank hands its collectives
// to gloo in the order they were issued. The issuing thread goes on (DDP's
// backward computes the next bucket's gradients) instead of waiting for its
// peers. A collective issued while others are queued goes behind them.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace neuron_sim::distributed {

class CollectiveQueue {
 public:
  // The lock every issuing thread holds while it numbers, agrees or queues a
  // collective. Waits until no collective is queued or running when `idle`.
  std::unique_lock<std::mutex> lock(bool idle);
  // Nothing queued or running (the caller holds lock()).
  bool idle() const { return items_.empty() && !running_; }
  // Queues `item` (the caller holds lock()); the worker starts with the first.
  void post(std::function<void()> item);
  // Whether the calling thread is a queue's worker: what completes a Work
  // there hands the completion to another thread, so a user callback that
  // issues and waits for a collective never waits on the thread that runs it.
  static bool onWorker();

  // Runs what was queued, then ends the worker.
  ~CollectiveQueue();

 private:
  void serve();

  std::mutex mu_;
  std::condition_variable cv_;       // the worker: an item or the end
  std::condition_variable idle_cv_;  // issuing threads: the queue ran empty
  std::deque<std::function<void()>> items_;
  bool running_ = false;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace neuron_sim::distributed
