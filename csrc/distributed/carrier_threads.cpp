#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/carrier_threads.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include <pthread.h>

namespace neuron_sim::distributed {
namespace {

// Threads kept parked for the life of the process; one more that finishes its
// operation exits at once. A parked thread never exits later, at a moment
// unrelated to any operation (a thread's exit releases what it holds).
constexpr size_t kKeptParked = 8;

struct CarrierThreads {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> waiting;  // handed over, not yet taken by a thread
  size_t parked = 0;                          // threads waiting for an operation

  void serve() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      if (!waiting.empty()) {
        auto carry = std::move(waiting.front());
        waiting.pop_front();
        lock.unlock();
        carry();
        carry = nullptr;  // drop what it holds (tensors, the Work's state) before parking
        lock.lock();
        continue;
      }
      if (parked >= kKeptParked) return;
      ++parked;
      cv.wait(lock, [&] { return !waiting.empty(); });
      --parked;
    }
  }
};

// Never destroyed: parked threads may still wait on it while the process exits.
CarrierThreads* g_carriers = nullptr;

CarrierThreads& carriers() {
  static bool once = [] {
    g_carriers = new CarrierThreads;
    // A forked child has none of the parent's threads: it starts with none parked
    // (the parent's object is left as it is, its mutex possibly held by a thread
    // that does not exist in the child).
    pthread_atfork(nullptr, nullptr, [] { g_carriers = new CarrierThreads; });
    return true;
  }();
  (void)once;
  return *g_carriers;
}

}  // namespace

void runOnCarrierThread(std::function<void()> carry) {
  CarrierThreads& c = carriers();
  {
    std::lock_guard<std::mutex> g(c.mu);
    c.waiting.push_back(std::move(carry));
    // A parked thread for each operation handed over and not yet taken; else one more thread.
    if (c.waiting.size() <= c.parked) {
      c.cv.notify_one();
      return;
    }
  }
  std::thread([&c] { c.serve(); }).detach();
}

}  // namespace neuron_sim::distributed
