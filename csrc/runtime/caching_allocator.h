// One device's caching segment allocator, as the release documents it: large
// segments taken from the HBM arena (what NRT hands out), tensors placed as
// blocks inside them; a freed block stays in its segment, merged with free
// neighbours, for the next request of its pool, until empty_cache() returns
// whole free segments to the arena. Two pools (requests < 1 MB small, the
// rest large); requests < 16 MB rounded up to a size class (minimum 256 B).
// Debug modes (debug_modes.h) poison and guard blocks. Plain C++, no torch.
#pragma once
#include <cstdint>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "runtime/arena.h"
#include "runtime/live_index.h"
#include "runtime/spin_lock.h"

namespace neuron_sim::runtime {

enum Pool : int { kSmallPool = 0, kLargePool = 1 };

// torch.cuda.memory_stats' StatArray: index 0 all pools, then small, large.
struct PoolStat {
  Stat all, small, large;
  Stat& of(Pool p) { return p == kSmallPool ? small : large; }
  void add(Pool p, int64_t n) { all.add(n); of(p).add(n); }
  void sub(Pool p, int64_t n) { all.sub(n); of(p).sub(n); }
  void resetPeak() { all.resetPeak(); small.resetPeak(); large.resetPeak(); }
  void resetAccumulated() { all.resetAccumulated(); small.resetAccumulated(); large.resetAccumulated(); }
};

// reserved (segments) >= allocated (live blocks, rounded) >= active (bytes
// the live tensors asked for); inactive_split: free blocks inside segments
// that also hold live blocks (fragmentation).
struct AllocatorStats {
  PoolStat reserved_bytes, allocated_bytes, active_bytes, inactive_split_bytes;
  PoolStat segment, allocation, active, inactive_split;
  int64_t allocation_requests = 0, num_tensor_frees = 0, num_ooms = 0, num_alloc_retries = 0;
  int64_t num_device_alloc = 0, num_device_free = 0;  // segments taken from / returned to the arena
  int64_t largest_free_block = 0;  // a cached free block or a free arena range
};

struct BlockInfo {
  uint64_t offset, size, requested;  // offset from the arena's base
  bool allocated;
  uint64_t user_offset;  // where the tensor's bytes start (after guard bytes)
};

struct SegmentInfo {
  uint64_t offset, size;
  Pool pool;
  std::vector<BlockInfo> blocks;  // address order, covering the segment
};

// What free() found. Guard damage is reported, not thrown: free runs in
// deleters, which must not throw; the caller decides how to report it.
struct FreedBlock {
  uintptr_t block = 0;  // where the block started (before its guard bytes, if any)
  uint64_t requested = 0, size = 0;
  bool guard_damaged = false;
  int64_t first_damaged_byte = 0;  // relative to the data pointer; < 0 means before it
};

// A segment taken from the arena (alloc) or returned to it: torch.cuda's
// segment_alloc / segment_free trace actions. Kept only while the memory
// history records (kHistory), for the caller to take after the call that
// made them: recording it under the allocator's lock could wait for the GIL.
struct SegmentEvent {
  bool alloc;
  uintptr_t address;
  uint64_t size;
};

struct GuardDamage {
  uintptr_t data;  // the block's data pointer
  uint64_t requested;
  int64_t first_damaged_byte;
};

class CachingAllocator {
 public:
  // The numbers the release documents, and torch.cuda's where it is silent (docs/memory.md).
  static constexpr uint64_t kMinBlock = 256;                 // release: smallest size class
  static constexpr uint64_t kSmallRequest = 1ull << 20;      // release: < 1 MB goes to the small pool
  static constexpr uint64_t kRoundedBelow = 16ull << 20;     // release: >= 16 MB not rounded to a class
  static constexpr uint64_t kSmallSegment = 2ull << 20;      // torch.cuda: kSmallBuffer
  static constexpr uint64_t kLargeSegment = 20ull << 20;     // torch.cuda: kLargeBuffer
  static constexpr uint64_t kMinLargeAlloc = 10ull << 20;    // torch.cuda: below it, a 20 MB segment
  static constexpr uint64_t kRoundLarge = 2ull << 20;        // torch.cuda: larger segments in 2 MB steps
  static constexpr uint64_t kGuardBytes = 512;               // before and (at least) after a guarded block
  static constexpr unsigned char kGuardByte = 0xFD;

  explicit CachingAllocator(uint64_t capacity);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // The size class of a request: < 16 MB rounded up to four classes per
  // power of two, in 256 B steps at least; larger requests to 256 B only.
  static uint64_t roundSize(uint64_t requested);
  // The pool of a request, by the bytes asked for (the release: < 1 MB small).
  static Pool poolOf(uint64_t requested) { return requested < kSmallRequest ? kSmallPool : kLargePool; }
  // The segment taken from the arena for a block that no cached one fits.
  static uint64_t segmentSize(Pool pool, uint64_t rounded);

  // A block from a cached segment, or a new segment; when the arena has no
  // room, the cached free segments are returned to it and the request
  // retried once (num_alloc_retries). nullptr when it still does not fit,
  // or for size 0. block_start and block_size, if given, receive where the
  // block starts and its bytes (its size class, or more when the rest of a
  // cached block was too small to split off).
  void* allocate(uint64_t size, uintptr_t* block_start = nullptr, uint64_t* block_size = nullptr);
  // Frees a pointer allocate() returned; throws std::invalid_argument for any
  // other (the block stays cached in its segment).
  FreedBlock free(void* ptr);
  // Returns every segment with no live block to the arena (empty_cache) and
  // the host pages of free arena ranges. Returns the bytes released.
  uint64_t emptyCache();
  std::vector<GuardDamage> checkGuards() const;
  // Caps reserved bytes (set_per_process_memory_fraction).
  void setLimit(uint64_t bytes) { arena_.setLimit(bytes); }
  uint64_t limit() const { return arena_.limit(); }
  bool owns(const void* ptr) const { return arena_.owns(ptr); }
  void countOom();
  void countRetry();    // a retry that succeeded after the caller freed memory (a garbage collection)
  void countRequest();  // a request refused before reaching allocate (an injected failure)

  uint64_t capacity() const { return arena_.capacity(); }
  uintptr_t base() const { return arena_.base(); }
  uint64_t reservedBytes() const;
  // The largest free block: cached, or a free range of the arena within the limit.
  uint64_t largestFreeBlock() const;
  AllocatorStats stats() const;
  void resetPeak();
  void resetAccumulated();
  std::vector<SegmentInfo> segments() const;
  // The segment events since the last call (SegmentEvent), oldest first.
  std::vector<SegmentEvent> takeSegmentEvents() {
    std::lock_guard<SpinLock> g(mu_);
    return std::exchange(segment_events_, {});
  }

 private:
  struct Segment;
  struct Block;
  struct BySize {  // best fit: the smallest free block that fits, the lowest address among equals
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeSet = std::set<Block*, BySize>;
  struct Block {
    uint64_t offset = 0, size = 0;     // in the arena
    uint64_t data = 0, requested = 0;  // live blocks: where the tensor's bytes start, what was asked for
    bool allocated = false, guarded = false;
    Segment* segment = nullptr;
    Block* prev = nullptr;  // neighbours in the same segment
    Block* next = nullptr;
    FreeSet::iterator pos;  // free blocks: where it sits in its pool's free set
  };
  struct Segment {
    uint64_t offset = 0, size = 0;
    Pool pool = kSmallPool;
    Block* first = nullptr;
    int64_t live = 0;  // live blocks
    Segment* prev = nullptr;  // all segments, in creation order
    Segment* next = nullptr;
  };

  Block* take(Pool pool, uint64_t size);  // best fit from the pool's cache, split; nullptr if none
  Block* fromNewSegment(Pool pool, uint64_t size, uint64_t segment_bytes);
  uint64_t releaseFreeSegments();  // whole free segments back to the arena; lock held
  void addFree(Block* b);
  void removeFree(Block* b);
  // A free block moved or changed size in place (split off its front, or
  // merged with a neighbour): its inactive-split share and its place in the
  // free set follow; usually it keeps its place, and the tree is untouched.
  void resizeFree(Block* b, uint64_t offset, uint64_t size);
  Block* newBlock();
  void dropBlock(Block* b);  // unlinks b from its segment and keeps it for reuse
  bool splitRemainderKept(Pool pool, uint64_t remaining) const;
  int64_t firstDamagedByte(const Block& b) const;
  static constexpr int64_t kIntact = INT64_MIN;
  static constexpr size_t kSpareNodes = 64;

  Arena arena_;  // the device's HBM: where segments come from
  mutable SpinLock mu_;  // taken twice per op (allocate, free)
  FreeSet free_[2];      // per pool
  LiveIndex<Block> live_;
  Segment* segments_ = nullptr;
  std::vector<Block*> spare_blocks_;
  std::vector<FreeSet::node_type> spare_nodes_;
  AllocatorStats stats_;
  std::vector<SegmentEvent> segment_events_;  // while kHistory is on
};

}  // namespace neuron_sim::runtime
