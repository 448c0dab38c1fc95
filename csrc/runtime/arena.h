// One device's HBM as the runtime (NRT) hands it out: a virtual range of the
// full capacity reserved up front (only touched pages cost host RAM), carved
// by a best-fit allocator with alignment, splitting and coalescing of
// neighbours on free. Its blocks are the caching allocator's segments
// (caching_allocator.h); an optional limit (set_per_process_memory_fraction)
// caps the bytes they hold.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <vector>

#include "runtime/live_index.h"
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

class Arena {
 public:
  static constexpr uint64_t kAlignment = 512;

  explicit Arena(uint64_t capacity);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Returns nullptr if no free range fits or the limit would be passed.
  void* allocate(uint64_t size);
  // Frees a pointer this arena returned.
  void free(void* ptr);
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

  uint64_t capacity() const { return capacity_; }
  uint64_t bytesInUse() const;
  uint64_t largestFreeBlock() const;
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
    uint64_t data = 0;  // live blocks: the offset LiveIndex finds them by
    bool allocated = false;
    Block* prev = nullptr;
    Block* next = nullptr;
    FreeSet::iterator pos;  // free blocks: where it sits in free_
  };
  Block* newBlock();
  void recycle(Block* b);  // unlinks b and keeps it for the next split
  void addFree(Block* b);
  void removeFree(Block* b);
  void refit(Block* b, bool grew);  // a free block changed size: restore its order in free_
  static constexpr size_t kSpareNodes = 64;

  uintptr_t base_ = 0;
  uint64_t capacity_;
  mutable SpinLock mu_;  // taken twice per op (allocate, free): a spin lock, not a mutex
  Block* first_ = nullptr;  // the block at offset 0
  FreeSet free_;
  LiveIndex<Block> live_;
  // Blocks and free-set nodes kept from merges for the next splits: a
  // steady allocate/free pattern costs no malloc.
  std::vector<Block*> spare_blocks_;
  std::vector<FreeSet::node_type> spare_nodes_;
  uint64_t in_use_ = 0;  // bytes held by live blocks
  uint64_t limit_;
};

}  // namespace neuron_sim::runtime
