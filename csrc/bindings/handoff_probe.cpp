// The autograd engine's device-thread handoff, measured on its own.
//
// PyTorch's engine runs the backward of every non-CPU device on a thread of
// its own: loss.backward() pushes the graph's root onto that device's ready
// queue (a mutex, a condition variable, a queue) and the calling thread waits
// on its own queue until the device thread pushes a wake-up back. That is two
// wake-ups of a sleeping thread per backward, plain C++ without the GIL, the
// same for CUDA, TorchNeuron and this emulator, and a cost the CPU's backward
// (run on the calling thread) never pays. benchmarks/bench_ops.py subtracts it
// from the neuron/CPU difference of a training step; what remains is the
// emulator's.
//
// Each handoff here wakes a thread that is asleep, as in a step, where the
// other side is busy long enough (the forward, the backward) to be asleep
// when the handoff comes: a side that finds work before it sleeps would
// measure a handoff the engine does not make.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "bindings/bindings.h"

namespace neuron_sim::bindings {
namespace {

// One ready queue of the engine, reduced to a count of pending items.
class ReadyQueue {
 public:
  void push() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++pending_;
    }
    notEmpty_.notify_one();
  }
  // False once closed and empty.
  bool pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    notEmpty_.wait(lock, [this] {
      // Checked under the lock right before sleeping: the flag says the
      // waiter is (about to be) asleep, and the pusher's lock waits for it.
      bool ready = pending_ > 0 || closed_;
      asleep_.store(!ready, std::memory_order_release);
      return ready;
    });
    asleep_.store(false, std::memory_order_relaxed);
    if (pending_ == 0) return false;
    --pending_;
    return true;
  }
  void close() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
    }
    notEmpty_.notify_one();
  }
  // Waits (yielding the core) until the consumer is asleep on this queue.
  void awaitSleeper() const {
    while (!asleep_.load(std::memory_order_acquire)) std::this_thread::yield();
  }

 private:
  std::mutex mutex_;
  std::condition_variable notEmpty_;
  int64_t pending_ = 0;
  bool closed_ = false;
  std::atomic<bool> asleep_{false};
};

// Seconds per round trip (caller -> device thread -> caller), the mean of
// `roundTrips` of them; the thread's start is not timed.
double autogradHandoffRoundTrip(int64_t roundTrips) {
  if (roundTrips < 1 || roundTrips > 1000000) {
    throw std::invalid_argument("autograd_handoff_round_trip: round_trips must be in [1, 1000000], got " +
                                std::to_string(roundTrips));
  }
  ReadyQueue toDevice, toCaller;
  std::thread device([&] {
    while (toDevice.pop()) {
      toCaller.awaitSleeper();  // the caller waits for the backward, asleep
      toCaller.push();
    }
  });
  using Clock = std::chrono::steady_clock;
  Clock::duration total{};
  for (int64_t i = 0; i <= roundTrips; ++i) {
    toDevice.awaitSleeper();  // the device thread sleeps between backwards
    auto t0 = Clock::now();
    toDevice.push();
    toCaller.pop();
    if (i > 0) total += Clock::now() - t0;  // the first one warms both threads up
  }
  toDevice.close();
  device.join();
  return std::chrono::duration<double>(total).count() / static_cast<double>(roundTrips);
}

}  // namespace

void registerHandoffProbe(py::module_& m) {
  m.def("_autograd_handoff_round_trip", &autogradHandoffRoundTrip, py::arg("round_trips"),
        py::call_guard<py::gil_scoped_release>(),
        "Seconds per round trip of the autograd engine's device-thread handoff (two C++ threads, a mutex "
        "and a condition variable per queue, each handoff waking a sleeping thread), without the GIL");
}

}  // namespace neuron_sim::bindings
