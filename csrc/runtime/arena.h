// One device's HBM: a virtual range of the full capacity reserved up front
// (only touched pages cost host RAM), carved by a best-fit allocator with
// alignment, block splitting and coalescing of neighbours on free. Debug
// modes (debug_modes.h) add poisoning and guard bytes to blocks; an optional
// limit (set_per_process_memory_fraction) caps the bytes held by blocks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <vector>

#include "runtime/spin_lock.h"

namespace neuron_sim::runtime {

// A counter the way torch.cuda.memory_stats reports one.
struct Stat {
  int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  void add(int64_t n) { current += n; allocated += n; if (current > peak) peak = current; }
  void sub(int64_t n) { current -= n; freed += n; }
  void resetPeak() { peak = current; }
  void resetAccumulated() { allocated = 0; freed = 0; }
};

struct ArenaStats {
  Stat allocated_bytes;  // bytes callers asked for, exactly
  Stat reserved_bytes;   // bytes of arena held by live blocks (aligned)
  Stat active_bytes;     // same as allocated: no block outlives its tensor
  int64_t allocation_requests = 0, num_tensor_frees = 0, num_ooms = 0, num_alloc_retries = 0;
  int64_t num_segments = 0, num_free_blocks = 0, largest_free_block = 0;
};

// A block as a snapshot sees it. Under NEURON_SIM_GUARD a live block starts
// with guard bytes: the tensor's data begins at user_offset, not offset.
struct BlockInfo {
  uint64_t offset, size, requested;
  bool allocated;
  uint64_t user_offset;
};

// What free() found. Guard damage is reported, not thrown: free runs in
// deleters, which must not throw; the caller decides how to report it.
struct FreedBlock {
  uintptr_t block = 0;  // where the block started (before its guard bytes, if any)
  uint64_t requested = 0, size = 0;
  bool guard_damaged = false;
  int64_t first_damaged_byte = 0;  // relative to the data pointer; < 0 means before it
};

struct GuardDamage {
  uintptr_t data;  // the block's data pointer
  uint64_t requested;
  int64_t first_damaged_byte;
};

class Arena {
 public:
  static constexpr uint64_t kAlignment = 512;  // as CUDA's caching allocator rounds
  static constexpr uint64_t kGuardBytes = 512; // before and (at least) after a guarded block
  static constexpr unsigned char kGuardByte = 0xFD;

  explicit Arena(uint64_t capacity);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Returns nullptr if no free range fits (the caller decides whether that is
  // an OOM, after its retry). size 0 is a valid request that returns nullptr.
  // block_start, if given, receives where the block starts (its guard bytes
  // included): the memory history records it without looking it up again.
  void* allocate(uint64_t size, uintptr_t* block_start = nullptr);
  // Frees a pointer this arena returned.
  FreedBlock free(void* ptr);
  // Guard bytes of every live guarded block that were overwritten.
  std::vector<GuardDamage> checkGuards() const;
  // Caps the bytes held by live blocks (set_per_process_memory_fraction);
  // allocations beyond it fail as if the device were full.
  void setLimit(uint64_t bytes);
  uint64_t limit() const;
  bool owns(const void* ptr) const {
    auto p = reinterpret_cast<uintptr_t>(ptr);
    return p >= base_ && p < base_ + capacity_;
  }
  // Returns pages of free ranges to the host (madvise); keeps the reservation.
  void releaseFreePages();
  void countRetry();
  void countOom();
  void countRequest();  // a request refused before reaching allocate (an injected failure)

  uint64_t capacity() const { return capacity_; }
  uint64_t bytesInUse() const;
  uint64_t largestFreeBlock() const;
  ArenaStats stats() const;
  void resetPeak();
  void resetAccumulated();
  std::vector<BlockInfo> blocks() const;
  uintptr_t base() const { return base_; }

 private:
  // Every block, free or live, in address order (prev/next), as CUDA's
  // caching allocator keeps its blocks: a freed block finds the neighbours it
  // coalesces with through its links, with no search.
  struct Block;
  struct BySize {  // best fit: the smallest free block that fits, the lowest address among equals
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeSet = std::set<Block*, BySize>;
  struct Block {
    uint64_t offset = 0, size = 0;
    uint64_t data = 0, requested = 0;  // live blocks: where the tensor's bytes start, what was asked for
    bool allocated = false, guarded = false;
    Block* prev = nullptr;
    Block* next = nullptr;
    FreeSet::iterator pos;  // free blocks: where it sits in free_
  };
  // Live blocks by data offset: open addressing over a power-of-two table
  // (a multiply and a shift per lookup; std::unordered_map divides).
  class LiveIndex {
   public:
    LiveIndex();
    void insert(Block* b);
    Block* find(uint64_t data) const;
    void erase(uint64_t data);
   private:
    size_t slot(uint64_t data) const { return static_cast<size_t>((data >> 9) * 0x9E3779B97F4A7C15ULL >> shift_); }
    void grow();
    std::vector<Block*> slots_;
    size_t count_ = 0;
    int shift_;
  };

  Block* newBlock();
  void recycle(Block* b);  // unlinks b and keeps it for the next split
  void addFree(Block* b);
  void removeFree(Block* b);
  void refit(Block* b, bool grew);  // a free block changed size: restore its order in free_
  static constexpr int64_t kIntact = INT64_MIN;
  static constexpr size_t kSpareNodes = 64;
  int64_t firstDamagedByte(const Block& b) const;  // kIntact if none

  uintptr_t base_ = 0;
  uint64_t capacity_;
  mutable SpinLock mu_;  // taken twice per op (allocate, free): a spin lock, not a mutex
  Block* first_ = nullptr;  // the block at offset 0
  FreeSet free_;
  LiveIndex live_;
  // Blocks and free-set nodes kept from merges for the next splits: a
  // steady allocate/free pattern costs no malloc.
  std::vector<Block*> spare_blocks_;
  std::vector<FreeSet::node_type> spare_nodes_;
  ArenaStats stats_;
  uint64_t limit_;
};

}  // namespace neuron_sim::runtime
