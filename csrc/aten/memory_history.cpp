#include "memory_history.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "../runtime/debug_modes.h"
#include "../runtime/device.h"
#include "../runtime/fault_injection.h"

namespace py = pybind11;

namespace neuron_sim::history {
namespace {

struct Frame {
  std::string filename, name;
  int line;
};
using Stack = std::shared_ptr<const std::vector<Frame>>;

enum class Action { kAlloc, kFreeRequested, kFreeCompleted, kOom };

struct Entry {
  Action action;
  uintptr_t addr;
  uint64_t size;
  uint64_t device_free;  // for kOom
  int64_t time_us;
  Stack frames;
};

struct State {
  std::mutex mu;
  // Read without the lock on the allocation path; written under it.
  std::atomic<bool> record_state{false};  // keep the stack of each live block
  std::atomic<bool> record_trace{false};  // keep the alloc/free trace ("all")
  std::atomic<bool> record_frames{true};  // context=None records sizes only
  size_t max_entries = SIZE_MAX;
  std::vector<std::deque<Entry>> traces = std::vector<std::deque<Entry>>(runtime::kMaxDevices);
  std::unordered_map<uintptr_t, Stack> sites;  // data pointer -> allocation stack
};

State& state() {
  static State* s = new State();  // leaked: deleters may run during exit
  return *s;
}

int64_t nowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

// The calling thread's Python stack, innermost frame first (as torch.cuda's
// snapshots list them). Ops run with the GIL released, so take it back: the
// thread's frames are intact while it waits in C++. Called with no arena or
// history lock held, so waiting for the GIL cannot deadlock against them.
// Threads without Python frames (autograd workers) get an empty stack.
Stack capturePythonStack() {
  auto frames = std::make_shared<std::vector<Frame>>();
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return frames;
  py::gil_scoped_acquire gil;
  PyFrameObject* f = PyEval_GetFrame();
  Py_XINCREF(f);
  while (f) {
    PyCodeObject* code = PyFrame_GetCode(f);
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    const char* name = PyUnicode_AsUTF8(code->co_name);
    if (!file || !name) PyErr_Clear();
    frames->push_back({file ? file : "?", name ? name : "?", PyFrame_GetLineNumber(f)});
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
  }
  return frames;
}

int deviceOf(const void* data) {
  runtime::Arena* a = runtime::arenaOwning(data);
  for (int i = 0; a && i < runtime::kMaxDevices; ++i)
    if (runtime::reservedArena(i) == a) return i;
  return -1;
}

void push(State& s, int device, Entry e) {
  if (device < 0 || !s.record_trace) return;
  auto& trace = s.traces[device];
  trace.push_back(std::move(e));
  while (trace.size() > s.max_entries) trace.pop_front();
}

bool wantsSites(const State& s) { return (s.record_state && s.record_frames) || runtime::debugMode(runtime::kGuard); }

void syncModeBit(const State& s) { runtime::setDebugMode(runtime::kHistory, s.record_state || s.record_trace); }

}  // namespace

// Sites are keyed by the data pointer (what a guard report or a tensor
// knows); trace entries carry the block's start, as the snapshot's blocks do,
// so the visualizer matches them even when guard bytes precede the data.
void recordAlloc(int device, const void* data, size_t requested) {
  State& s = state();
  Stack frames = (wantsSites(s) || (s.record_trace && s.record_frames)) ? capturePythonStack() : Stack();
  const uintptr_t block = s.record_trace ? runtime::arena(device).blockStart(data) : 0;
  std::lock_guard<std::mutex> g(s.mu);
  if (wantsSites(s)) s.sites[reinterpret_cast<uintptr_t>(data)] = frames;
  push(s, device, {Action::kAlloc, block, requested, 0, nowUs(), frames});
}

void recordFree(const void* data, uintptr_t block, size_t requested) {
  State& s = state();
  Stack frames = s.record_trace && s.record_frames ? capturePythonStack() : Stack();
  int device = deviceOf(data);
  std::lock_guard<std::mutex> g(s.mu);
  s.sites.erase(reinterpret_cast<uintptr_t>(data));
  int64_t t = nowUs();
  // Blocks return to the arena at once: the free is requested and completed together.
  push(s, device, {Action::kFreeRequested, block, requested, 0, t, frames});
  push(s, device, {Action::kFreeCompleted, block, requested, 0, t, frames});
}

void recordOom(int device, size_t requested, uint64_t device_free) {
  State& s = state();
  Stack frames = s.record_trace && s.record_frames ? capturePythonStack() : Stack();
  std::lock_guard<std::mutex> g(s.mu);
  push(s, device, {Action::kOom, 0, requested, device_free, nowUs(), frames});
}

std::string allocationSite(const void* data) {
  State& s = state();
  Stack frames;
  {
    std::lock_guard<std::mutex> g(s.mu);
    auto it = s.sites.find(reinterpret_cast<uintptr_t>(data));
    if (it != s.sites.end()) frames = it->second;
  }
  if (!frames) return "  (allocation site not recorded)\n";
  if (frames->empty()) return "  (allocated outside Python: no Python frames on the allocating thread)\n";
  std::ostringstream out;
  for (auto f = frames->rbegin(); f != frames->rend(); ++f)
    out << "  File \"" << f->filename << "\", line " << f->line << ", in " << f->name << "\n";
  return out.str();
}

namespace {

// Frame lists shared by many entries become one Python list, which pickle
// then stores once.
struct FrameConverter {
  std::unordered_map<const void*, py::list> done;
  py::list operator()(const Stack& st) {
    if (!st) return py::list();
    auto it = done.find(st.get());
    if (it != done.end()) return it->second;
    py::list l;
    for (const Frame& f : *st) {
      py::dict d;
      d["filename"] = f.filename;
      d["line"] = f.line;
      d["name"] = f.name;
      l.append(d);
    }
    done.emplace(st.get(), l);
    return l;
  }
};

const char* actionName(Action a) {
  switch (a) {
    case Action::kAlloc: return "alloc";
    case Action::kFreeRequested: return "free_requested";
    case Action::kFreeCompleted: return "free_completed";
    case Action::kOom: return "oom";
  }
  return "?";
}

}  // namespace

// torch.cuda.memory._snapshot()'s structure: one segment per device arena
// (the whole HBM, reserved up front) with its blocks in address order, and a
// trace of allocator actions per device.
py::dict snapshot() {
  State& s = state();
  FrameConverter frames;
  py::list segments;
  const int n = runtime::deviceCount();
  std::unordered_map<uintptr_t, Stack> sites;
  std::vector<std::deque<Entry>> traces(n);
  {
    std::lock_guard<std::mutex> g(s.mu);
    sites = s.sites;
    for (int i = 0; i < n; ++i) traces[i] = s.traces[i];
  }
  for (int i = 0; i < n; ++i) {
    runtime::Arena* a = runtime::reservedArena(i);
    if (!a) continue;
    py::list blocks;
    uint64_t allocated = 0, requested = 0;
    for (const auto& b : a->blocks()) {
      py::dict d;
      d["address"] = a->base() + b.offset;
      d["size"] = b.size;
      d["requested_size"] = b.allocated ? b.requested : b.size;
      d["state"] = b.allocated ? "active_allocated" : "inactive";
      auto it = b.allocated ? sites.find(a->base() + b.user_offset) : sites.end();
      d["frames"] = it != sites.end() ? frames(it->second) : py::list();
      blocks.append(d);
      if (b.allocated) {
        allocated += b.size;
        requested += b.requested;
      }
    }
    py::dict seg;
    seg["device"] = i;
    seg["address"] = a->base();
    seg["total_size"] = a->capacity();
    seg["allocated_size"] = allocated;
    seg["active_size"] = allocated;
    seg["requested_size"] = requested;
    seg["stream"] = 0;
    seg["segment_type"] = "large";
    seg["segment_pool_id"] = py::make_tuple(0, 0);
    seg["is_expandable"] = false;
    seg["frames"] = py::list();
    seg["blocks"] = blocks;
    segments.append(seg);
  }
  py::list device_traces;
  for (int i = 0; i < n; ++i) {
    py::list trace;
    for (const Entry& e : traces[i]) {
      py::dict d;
      d["action"] = actionName(e.action);
      if (e.action != Action::kOom) d["addr"] = e.addr;
      d["size"] = e.size;
      d["stream"] = 0;
      d["time_us"] = e.time_us;
      d["frames"] = frames(e.frames);
      if (e.action == Action::kOom) d["device_free"] = e.device_free;
      trace.append(d);
    }
    device_traces.append(trace);
  }
  py::dict out;
  out["segments"] = segments;
  out["device_traces"] = device_traces;
  py::dict settings;
  settings["PYTORCH_NO_CUDA_MEMORY_CACHING"] = true;  // freed blocks return to the arena at once
  out["allocator_settings"] = settings;
  return out;
}

void recordHistory(const std::optional<std::string>& enabled, const std::optional<std::string>& context,
                   size_t max_entries, bool clear) {
  if (enabled && *enabled != "state" && *enabled != "all")
    throw py::value_error("enabled must be None, 'state' or 'all', got '" + *enabled + "'");
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  s.record_state = enabled.has_value();
  s.record_trace = enabled.has_value() && *enabled == "all";
  s.record_frames = context.has_value();
  s.max_entries = max_entries;
  if (clear)
    for (auto& t : s.traces) t.clear();
  // Stacks of blocks allocated while recording stay valid until those blocks
  // are freed; but once nothing records, the map would go stale.
  if (!s.record_state && !runtime::debugMode(runtime::kGuard)) s.sites.clear();
  syncModeBit(s);
}

}  // namespace neuron_sim::history
