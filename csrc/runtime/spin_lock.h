// A lock for short critical sections on the per-op path (an arena's blocks
// and statistics). A free lock costs one atomic exchange to take and a plain
// store to release, where a std::mutex costs two library calls and two atomic
// read-modify-writes. A waiter spins briefly, then yields its core: the
// holder may be a thread the scheduler has set aside.
#pragma once
#include <atomic>
#include <thread>

namespace neuron_sim::runtime {

class SpinLock {
 public:
  void lock() {
    while (flag_.exchange(true, std::memory_order_acquire)) wait();
  }
  void unlock() { flag_.store(false, std::memory_order_release); }

 private:
  void wait() const {
    for (int i = 0; flag_.load(std::memory_order_relaxed); ++i) {
      if (i >= 64) std::this_thread::yield();
#if defined(__x86_64__) || defined(__i386__)
      else __builtin_ia32_pause();
#endif
    }
  }
  std::atomic<bool> flag_{false};
};

}  // namespace neuron_sim::runtime
