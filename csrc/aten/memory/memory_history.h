// Where each block of device memory came from: the stack of every allocation
// while torch.neuron.memory._record_memory_history() is on (or NEURON_SIM_GUARD
// needs allocation sites), a trace of allocator actions, and the data of
// torch.cuda.memory._snapshot(). Called from the allocator only when
// runtime::kHistory or kGuard is set: free otherwise. Plain C++: the stack
// comes from a capture hook the bindings install (the Python frames), and
// bindings/memory_bindings.cpp turns a Snapshot into Python objects.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace neuron_sim::runtime {
class CachingAllocator;
}

namespace neuron_sim::history {

struct Frame {
  std::string filename, name;
  int line;
};
// Innermost frame first (as torch.cuda's snapshots list them). Shared: many
// trace entries and sites hold the same stack.
using Stack = std::shared_ptr<const std::vector<Frame>>;

// Captures the calling thread's stack. Called with no arena or history lock
// held (the hook may wait for the GIL). Without a hook, stacks are empty.
using StackCapture = Stack (*)();
void setStackCapture(StackCapture capture);

// `block` is where the block started (CachingAllocator::allocate tells), as
// for recordFree; block_size its bytes (the size class), which the
// allocator's allocated bytes count.
void recordAlloc(int device, const void* data, uintptr_t block, size_t requested, uint64_t block_size);
// `block` is where the block started: the address snapshots and traces use.
void recordFree(const void* data, uintptr_t block, size_t requested, uint64_t block_size);
void recordOom(int device, size_t requested, uint64_t device_free);
// Takes the allocator's segment events (segments taken from or returned to
// the arena) into the device's trace as segment_alloc / segment_free. Call
// with no allocator lock held, after each allocate or empty_cache while
// runtime::kHistory is set.
void recordSegments(int device, runtime::CachingAllocator& allocator);
// "  File "x.py", line 3, in f" lines of the block's allocation, innermost last.
std::string allocationSite(const void* data);

// torch.cuda.memory._record_memory_history's enabled ("state", "all" or none)
// and context (none: sizes without stacks); the trace keeps max_entries.
// Throws std::invalid_argument for any other `enabled`.
void recordHistory(const std::optional<std::string>& enabled, const std::optional<std::string>& context,
                   size_t max_entries, bool clear);

enum class Action { kAlloc, kFreeRequested, kFreeCompleted, kOom, kSegmentAlloc, kSegmentFree };
// "alloc", "free_requested", "free_completed", "oom", "segment_alloc", "segment_free"
const char* actionName(Action a);

struct TraceEntry {
  Action action;
  uintptr_t addr;         // the block's or the segment's start (not for kOom)
  uint64_t size;          // blocks: the bytes asked for (as torch.cuda's trace); segments: their bytes
  uint64_t block_size;    // blocks: their size class (what allocated bytes count); segments: their bytes
  uint64_t device_free;  // for kOom
  int64_t time_us;
  Stack frames;  // null: recorded without context
};

struct SnapshotBlock {
  uintptr_t address;
  uint64_t size, requested_size;
  bool allocated;
  Stack frames;  // null when no site was recorded
};

// One segment of a device's caching allocator, as torch.cuda's snapshots list them.
struct SnapshotSegment {
  int device;
  uintptr_t address;
  uint64_t total_size, allocated_size, requested_size;
  bool small_pool;
  std::vector<SnapshotBlock> blocks;  // in address order
};

// A copy of each device's trace, one vector per visible device.
std::vector<std::vector<TraceEntry>> traces();
// Each visible device's trace, taken out of the history (which goes on
// recording into empty ones): no copy, for a reader that owns the recording.
using Trace = std::deque<TraceEntry>;
std::vector<Trace> takeTraces();
// Calls f on each entry of one device's trace in order, under the history's
// lock (no copy; allocations that record meanwhile wait).
void forEachTraceEntry(int device, const std::function<void(const TraceEntry&)>& f);

struct Snapshot {
  std::vector<SnapshotSegment> segments;
  std::vector<std::vector<TraceEntry>> device_traces;  // one per device
};
Snapshot snapshot();

}  // namespace neuron_sim::history
