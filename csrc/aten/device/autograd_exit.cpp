// Why a program that ran a backward on `neuron` could abort after its last line.
//
// PyTorch runs each non-CPU device's backward on a thread of its own
// ("pt_autograd_<index>"). Every backward started from Python stashes the
// caller's contextvars.Context in thread-local state, which the backward's
// GraphTask copies; the caller erases its own copy when the backward returns,
// so whichever thread drops the GraphTask last frees the Context, and freeing
// a Python object takes the GIL. The device thread wakes the caller *before*
// it drops its own reference at the end of its loop turn. When it is
// preempted in between (two threads on one core make it likely) and the
// program ends first, it asks for the GIL while the interpreter finalizes;
// CPython ends such a thread with pthread_exit, whose unwinding through a
// noexcept destructor is std::terminate: "terminate called without an active
// exception", exit status -6. CUDA's device threads share the race.
//
// The cure, run from an atexit handler (before finalization begins): a
// backward that runs one empty node on each such thread, made from C++ so it
// captures no Python object, calls no operator and counts in no statistic.
// Each thread pops it only after finishing its previous turn, so when it
// completes, no device thread holds a GraphTask any more.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>

#include <chrono>
#include <condition_variable>
#include <dirent.h>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "aten/device/autograd_exit.h"
#include "aten/neuron.h"
#include "runtime/device.h"

namespace neuron_sim {
namespace {

namespace ag = torch::autograd;

// A node that does nothing, on whichever device its one input lives.
struct EmptyNode final : ag::Node {
  ag::variable_list apply(ag::variable_list&&) override { return {}; }
  std::string name() const override { return "NeuronExitDrain"; }
};

// Device indices of the running autograd device threads, from their names:
// the engine starts them on the first backward on any device, never before.
std::set<int> deviceThreadIndices() {
  std::set<int> found;
  const std::string prefix = "pt_autograd_";
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return found;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + entry->d_name + "/comm");
    std::string name;
    if (!std::getline(comm, name) || name.rfind(prefix, 0) != 0) continue;
    try {
      int index = std::stoi(name.substr(prefix.size()));
      if (index >= 0) found.insert(index);
    } catch (...) {  // a thread of someone else's with a look-alike name
    }
  }
  closedir(dir);
  return found;
}

// A 0-element tensor on neuron:index made without the dispatcher (no
// operator runs, nothing is allocated): only its device matters here.
at::Tensor emptyOn(int index) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0,
                       c10::DataPtr(nullptr, neuronDevice(index)), nullptr, false);
  return at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                  caffe2::TypeMeta::Make<float>());
}

void runEmptyBackward(int index) {
  c10::intrusive_ptr<ag::Node> node = c10::make_intrusive<EmptyNode>();
  at::Tensor grad = emptyOn(index);
  uint32_t input = node->add_input_metadata(grad);
  ag::Engine::get_default_engine().execute({ag::Edge(node, input)}, {grad}, /*keep_graph=*/false,
                                           /*create_graph=*/false, /*accumulate_grad=*/true);
}

}  // namespace

bool drainAutogradDeviceThreads(int timeoutMs) {
  std::set<int> threads = deviceThreadIndices();
  int devices = 0;
  try {
    devices = runtime::deviceCount();
  } catch (...) {
    return true;  // no machine, so no neuron backward ever ran
  }
  struct Done {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
  };
  std::set<int> indices;
  for (int index : threads) {
    if (index < devices) indices.insert(index);
  }
  if (indices.empty()) return true;  // no backward has run on any device
  auto done = std::make_shared<Done>();
  // On a thread of its own, so that a device thread stuck in another
  // thread's backward cannot keep the process from exiting.
  std::thread drain([indices, done] {
    for (int index : indices) {
      try {
        runEmptyBackward(index);
      } catch (...) {  // exiting anyway: the drain is best effort
      }
    }
    std::lock_guard<std::mutex> lock(done->mutex);
    done->done = true;
    done->cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(done->mutex);
  bool finished = done->cv.wait_for(lock, std::chrono::milliseconds(timeoutMs), [&] { return done->done; });
  lock.unlock();
  if (finished) {
    drain.join();
  } else {
    drain.detach();
  }
  return finished;
}

}  // namespace neuron_sim
