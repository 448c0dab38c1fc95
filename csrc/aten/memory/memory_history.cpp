#include "aten/memory/memory_history.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "runtime/caching_allocator.h"
#include "runtime/debug_modes.h"
#include "runtime/device.h"
#include "runtime/fault_injection.h"

namespace neuron_sim::history {
namespace {

using Entry = TraceEntry;
std::atomic<StackCapture> g_capture{nullptr};

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

Stack captureStack() {
  StackCapture capture = g_capture.load(std::memory_order_acquire);
  return capture ? capture() : std::make_shared<const std::vector<Frame>>();
}

int deviceOf(const void* data) {
  runtime::CachingAllocator* a = runtime::allocatorOwning(data);
  for (int i = 0; a && i < runtime::kMaxDevices; ++i)
    if (runtime::reservedAllocator(i) == a) return i;
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

void setStackCapture(StackCapture capture) { g_capture.store(capture, std::memory_order_release); }

// Sites are keyed by the data pointer (what a guard report or a tensor
// knows); trace entries carry the block's start, as the snapshot's blocks do,
// so the visualizer matches them even when guard bytes precede the data.
void recordAlloc(int device, const void* data, uintptr_t block, size_t requested, uint64_t block_size) {
  State& s = state();
  Stack frames = (wantsSites(s) || (s.record_trace && s.record_frames)) ? captureStack() : Stack();
  std::lock_guard<std::mutex> g(s.mu);
  if (wantsSites(s)) s.sites[reinterpret_cast<uintptr_t>(data)] = frames;
  push(s, device, {Action::kAlloc, block, requested, block_size, 0, nowUs(), frames});
}

void recordFree(const void* data, uintptr_t block, size_t requested, uint64_t block_size) {
  State& s = state();
  Stack frames = s.record_trace && s.record_frames ? captureStack() : Stack();
  int device = deviceOf(data);
  std::lock_guard<std::mutex> g(s.mu);
  s.sites.erase(reinterpret_cast<uintptr_t>(data));
  int64_t t = nowUs();
  // Blocks return to the arena at once: the free is requested and completed together.
  push(s, device, {Action::kFreeRequested, block, requested, block_size, 0, t, frames});
  push(s, device, {Action::kFreeCompleted, block, requested, block_size, 0, t, frames});
}

void recordOom(int device, size_t requested, uint64_t device_free) {
  State& s = state();
  Stack frames = s.record_trace && s.record_frames ? captureStack() : Stack();
  std::lock_guard<std::mutex> g(s.mu);
  push(s, device, {Action::kOom, 0, requested, 0, device_free, nowUs(), frames});
}

void recordSegments(int device, runtime::CachingAllocator& allocator) {
  std::vector<runtime::SegmentEvent> events = allocator.takeSegmentEvents();
  if (events.empty()) return;
  State& s = state();
  // The stack of the call that took or returned the segments (an allocation, empty_cache).
  Stack frames = s.record_trace && s.record_frames ? captureStack() : Stack();
  std::lock_guard<std::mutex> g(s.mu);
  const int64_t t = nowUs();
  for (const runtime::SegmentEvent& e : events)
    push(s, device, {e.alloc ? Action::kSegmentAlloc : Action::kSegmentFree, e.address, e.size, e.size, 0, t, frames});
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

const char* actionName(Action a) {
  switch (a) {
    case Action::kAlloc: return "alloc";
    case Action::kFreeRequested: return "free_requested";
    case Action::kFreeCompleted: return "free_completed";
    case Action::kOom: return "oom";
    case Action::kSegmentAlloc: return "segment_alloc";
    case Action::kSegmentFree: return "segment_free";
  }
  return "?";
}

std::vector<std::vector<TraceEntry>> traces() {
  State& s = state();
  std::vector<std::vector<TraceEntry>> out(runtime::deviceCount());
  std::lock_guard<std::mutex> g(s.mu);
  for (size_t i = 0; i < out.size(); ++i) out[i].assign(s.traces[i].begin(), s.traces[i].end());
  return out;
}

std::vector<Trace> takeTraces() {
  State& s = state();
  std::vector<Trace> out(runtime::deviceCount());
  std::lock_guard<std::mutex> g(s.mu);
  for (size_t i = 0; i < out.size(); ++i) out[i].swap(s.traces[i]);
  return out;
}

void forEachTraceEntry(int device, const std::function<void(const TraceEntry&)>& f) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  for (const TraceEntry& e : s.traces[device]) f(e);
}

Snapshot snapshot() {
  State& s = state();
  Snapshot out;
  const int n = runtime::deviceCount();
  std::unordered_map<uintptr_t, Stack> sites;
  {
    std::lock_guard<std::mutex> g(s.mu);
    sites = s.sites;
  }
  out.device_traces = traces();
  for (int i = 0; i < n; ++i) {
    runtime::CachingAllocator* a = runtime::reservedAllocator(i);
    if (!a) continue;
    for (const auto& segment : a->segments()) {
      SnapshotSegment seg{i, a->base() + segment.offset, segment.size, 0, 0, segment.pool == runtime::kSmallPool, {}};
      for (const auto& b : segment.blocks) {
        auto it = b.allocated ? sites.find(a->base() + b.user_offset) : sites.end();
        seg.blocks.push_back({a->base() + b.offset, b.size, b.allocated ? b.requested : b.size, b.allocated,
                              it != sites.end() ? it->second : Stack()});
        if (b.allocated) {
          seg.allocated_size += b.size;
          seg.requested_size += b.requested;
        }
      }
      out.segments.push_back(std::move(seg));
    }
  }
  return out;
}

void recordHistory(const std::optional<std::string>& enabled, const std::optional<std::string>& context,
                   size_t max_entries, bool clear) {
  if (enabled && *enabled != "state" && *enabled != "all")
    throw std::invalid_argument("enabled must be None, 'state' or 'all', got '" + *enabled + "'");
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
