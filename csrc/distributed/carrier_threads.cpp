#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/carrier_threads.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace neuron_sim::distributed {
namespace {

// How long a thread with nothing to carry stays parked before it exits.
constexpr auto kParkedFor = std::chrono::seconds(5);

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
      ++parked;
      bool handed = cv.wait_for(lock, kParkedFor, [&] { return !waiting.empty(); });
      --parked;
      if (!handed) return;
    }
  }
};

// Never destroyed: parked threads may still wait on it while the process exits.
CarrierThreads& carriers() {
  static auto* c = new CarrierThreads;
  return *c;
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
