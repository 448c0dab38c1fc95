#include "runtime/caching_allocator.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "runtime/debug_modes.h"
#include "runtime/host_access.h"

namespace neuron_sim::runtime {

bool CachingAllocator::BySize::operator()(const Block* a, const Block* b) const {
  return a->size != b->size ? a->size < b->size : a->offset < b->offset;
}

CachingAllocator::CachingAllocator(uint64_t capacity) : arena_(capacity) { spare_nodes_.reserve(kSpareNodes); }

CachingAllocator::~CachingAllocator() {
  for (auto& f : free_) f.clear();
  for (Segment* s = segments_; s;) {
    for (Block* b = s->first; b;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
    Segment* next = s->next;
    delete s;
    s = next;
  }
  for (Block* b : spare_blocks_) delete b;
}

uint64_t CachingAllocator::roundSize(uint64_t n) {
  if (n <= kMinBlock) return kMinBlock;
  if (n >= kRoundedBelow) return (n + kMinBlock - 1) / kMinBlock * kMinBlock;  // alignment only
  // Four classes per power of two (torch.cuda's roundup_power2_divisions=4),
  // never finer than 256 B: at most a quarter of a block is padding.
  uint64_t pow2 = uint64_t{1} << (63 - __builtin_clzll(n));
  uint64_t step = pow2 / 4 < kMinBlock ? kMinBlock : pow2 / 4;
  return (n + step - 1) / step * step;
}

uint64_t CachingAllocator::segmentSize(Pool pool, uint64_t rounded) {
  if (pool == kSmallPool) return kSmallSegment;
  if (rounded < kMinLargeAlloc) return kLargeSegment;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

// torch.cuda's rule: a small block keeps a remainder of one minimum block; a
// large one only a remainder that is itself a large request.
bool CachingAllocator::splitRemainderKept(Pool pool, uint64_t remaining) const {
  return pool == kSmallPool ? remaining >= kMinBlock : remaining > kSmallRequest;
}

CachingAllocator::Block* CachingAllocator::newBlock() {
  if (spare_blocks_.empty()) return new Block{};
  Block* b = spare_blocks_.back();
  spare_blocks_.pop_back();
  *b = Block{};
  return b;
}

void CachingAllocator::dropBlock(Block* b) {
  if (b->prev) b->prev->next = b->next;
  else b->segment->first = b->next;
  if (b->next) b->next->prev = b->prev;
  if (spare_blocks_.size() < kSpareNodes) spare_blocks_.push_back(b);
  else delete b;
}

// A free block counts as inactive split while it is only part of its segment.
void CachingAllocator::addFree(Block* b) {
  b->allocated = false;
  FreeSet& set = free_[b->segment->pool];
  if (spare_nodes_.empty()) {
    b->pos = set.insert(b).first;
  } else {
    auto node = std::move(spare_nodes_.back());
    spare_nodes_.pop_back();
    node.value() = b;
    b->pos = set.insert(std::move(node)).position;
  }
  if (b->size < b->segment->size) {
    stats_.inactive_split_bytes.add(b->segment->pool, static_cast<int64_t>(b->size));
    stats_.inactive_split.add(b->segment->pool, 1);
  }
}

void CachingAllocator::removeFree(Block* b) {
  auto node = free_[b->segment->pool].extract(b->pos);
  if (spare_nodes_.size() < kSpareNodes) spare_nodes_.push_back(std::move(node));
  if (b->size < b->segment->size) {
    stats_.inactive_split_bytes.sub(b->segment->pool, static_cast<int64_t>(b->size));
    stats_.inactive_split.sub(b->segment->pool, 1);
  }
}

void CachingAllocator::resizeFree(Block* b, uint64_t offset, uint64_t size) {
  const Pool pool = b->segment->pool;
  const uint64_t whole = b->segment->size;
  const bool was_split = b->size < whole, is_split = size < whole, grew = size > b->size;
  if (was_split && is_split) {
    if (grew) stats_.inactive_split_bytes.add(pool, static_cast<int64_t>(size - b->size));
    else stats_.inactive_split_bytes.sub(pool, static_cast<int64_t>(b->size - size));
  } else if (was_split) {
    stats_.inactive_split_bytes.sub(pool, static_cast<int64_t>(b->size));
    stats_.inactive_split.sub(pool, 1);
  } else if (is_split) {
    stats_.inactive_split_bytes.add(pool, static_cast<int64_t>(size));
    stats_.inactive_split.add(pool, 1);
  }
  b->offset = offset;
  b->size = size;
  // A block that grew can only have passed its successors, one that shrank
  // its predecessors (as in the arena).
  FreeSet& set = free_[pool];
  const BySize less;
  auto it = b->pos;
  const bool in_place = grew ? std::next(it) == set.end() || less(b, *std::next(it))
                             : it == set.begin() || less(*std::prev(it), b);
  if (in_place) return;
  auto node = set.extract(it);
  b->pos = set.insert(std::move(node)).position;
}

CachingAllocator::Block* CachingAllocator::take(Pool pool, uint64_t size) {
  Block probe;
  probe.size = size;
  FreeSet& set = free_[pool];
  auto it = set.lower_bound(&probe);
  if (it == set.end()) return nullptr;
  Block* f = *it;
  const uint64_t remaining = f->size - size;
  if (!splitRemainderKept(pool, remaining)) {
    removeFree(f);
    return f;
  }
  // Split: a new block takes the front; the free block keeps the rest in place.
  Block* b = newBlock();
  b->segment = f->segment;
  b->offset = f->offset;
  b->size = size;
  b->prev = f->prev;
  b->next = f;
  if (f->prev) f->prev->next = b;
  else f->segment->first = b;
  f->prev = b;
  resizeFree(f, f->offset + size, remaining);
  return b;
}

CachingAllocator::Block* CachingAllocator::fromNewSegment(Pool pool, uint64_t size, uint64_t segment_bytes) {
  void* p = arena_.allocate(segment_bytes);
  if (!p) return nullptr;
  auto* s = new Segment{};
  s->offset = reinterpret_cast<uintptr_t>(p) - arena_.base();
  s->size = segment_bytes;
  s->pool = pool;
  s->next = segments_;
  if (segments_) segments_->prev = s;
  segments_ = s;
  Block* b = newBlock();
  b->segment = s;
  b->offset = s->offset;
  b->size = segment_bytes;
  s->first = b;
  stats_.reserved_bytes.add(pool, static_cast<int64_t>(segment_bytes));
  stats_.segment.add(pool, 1);
  stats_.num_device_alloc++;
  if (debugMode(kHistory)) segment_events_.push_back({true, arena_.base() + s->offset, segment_bytes});
  addFree(b);
  return take(pool, size);
}

uint64_t CachingAllocator::releaseFreeSegments() {
  uint64_t released = 0;
  for (Segment* s = segments_; s;) {
    Segment* next = s->next;
    if (s->live == 0) {  // one free block covering the segment
      removeFree(s->first);
      dropBlock(s->first);
      if (s->prev) s->prev->next = s->next;
      else segments_ = s->next;
      if (s->next) s->next->prev = s->prev;
      arena_.free(reinterpret_cast<void*>(arena_.base() + s->offset));
      stats_.reserved_bytes.sub(s->pool, static_cast<int64_t>(s->size));
      stats_.segment.sub(s->pool, 1);
      stats_.num_device_free++;
      if (debugMode(kHistory)) segment_events_.push_back({false, arena_.base() + s->offset, s->size});
      released += s->size;
      delete s;
    }
    s = next;
  }
  return released;
}

void* CachingAllocator::allocate(uint64_t requested, uintptr_t* block_start, uint64_t* block_size) {
  const uint32_t modes = debugModes();
  const bool guarded = (modes & kGuard) != 0;
  const uint64_t front = guarded ? kGuardBytes : 0;
  // A guarded block has kGuardBytes before the data and at least as many after.
  const uint64_t size = roundSize(requested + 2 * front);
  const Pool pool = poolOf(requested);
  Block* b;
  {
    std::lock_guard<SpinLock> g(mu_);
    stats_.allocation_requests++;
    if (requested == 0) return nullptr;
    b = take(pool, size);
    if (!b) {
      const uint64_t seg = segmentSize(pool, size);
      b = fromNewSegment(pool, size, seg);
      if (!b && releaseFreeSegments() > 0) {  // as torch.cuda: free the cache, retry
        stats_.num_alloc_retries++;
        b = fromNewSegment(pool, size, seg);
      }
      // A device too small or too fragmented for the usual segment: one just
      // large enough for this block.
      const uint64_t exact = (size + Arena::kAlignment - 1) / Arena::kAlignment * Arena::kAlignment;
      if (!b && exact < seg) b = fromNewSegment(pool, size, exact);
      if (!b) return nullptr;
    }
    b->allocated = true;
    b->guarded = guarded;
    b->requested = requested;
    b->data = b->offset + front;
    b->segment->live++;
    live_.insert(b);
    stats_.allocated_bytes.add(pool, static_cast<int64_t>(b->size));
    stats_.allocation.add(pool, 1);
    stats_.active_bytes.add(pool, static_cast<int64_t>(requested));
  }
  auto* block = reinterpret_cast<unsigned char*>(arena_.base() + b->offset);
  if (block_start) *block_start = arena_.base() + b->offset;
  if (block_size) *block_size = b->size;
  if (modes & (kGuard | kPoison)) {
    // The block is ours alone until we return it: no lock needed to fill it.
    HostAccess access;
    if (guarded) {
      std::memset(block, kGuardByte, front);
      std::memset(block + front + requested, kGuardByte, b->size - front - requested);
    }
    if (modes & kPoison) std::memset(block + front, kPoisonByte, requested);
  }
  return block + front;
}

int64_t CachingAllocator::firstDamagedByte(const Block& b) const {
  const auto* block = reinterpret_cast<const unsigned char*>(arena_.base() + b.offset);
  const uint64_t front = b.data - b.offset;
  for (uint64_t i = 0; i < front; ++i)
    if (block[i] != kGuardByte) return static_cast<int64_t>(i) - static_cast<int64_t>(front);
  for (uint64_t i = front + b.requested; i < b.size; ++i)
    if (block[i] != kGuardByte) return static_cast<int64_t>(i - front);
  return kIntact;
}

FreedBlock CachingAllocator::free(void* ptr) {
  std::lock_guard<SpinLock> g(mu_);
  const uint64_t data_offset = reinterpret_cast<uintptr_t>(ptr) - arena_.base();
  Block* b = owns(ptr) ? live_.find(data_offset) : nullptr;
  if (b == nullptr)
    throw std::invalid_argument("free of a pointer that is not a live block of this device's allocator");
  FreedBlock result;
  result.block = arena_.base() + b->offset;
  result.requested = b->requested;
  result.size = b->size;
  const bool poison = debugMode(kPoison);
  if (b->guarded || poison) {
    HostAccess access;
    if (b->guarded) {
      int64_t at = firstDamagedByte(*b);
      result.guard_damaged = at != kIntact;
      result.first_damaged_byte = result.guard_damaged ? at : 0;
    }
    // Reads of freed memory through a stale pointer now see NaN.
    if (poison) std::memset(reinterpret_cast<void*>(arena_.base() + b->offset), kPoisonByte, b->size);
  }
  live_.erase(data_offset);
  Segment* s = b->segment;
  const Pool pool = s->pool;
  s->live--;
  stats_.allocated_bytes.sub(pool, static_cast<int64_t>(b->size));
  stats_.allocation.sub(pool, 1);
  stats_.active_bytes.sub(pool, static_cast<int64_t>(b->requested));
  stats_.num_tensor_frees++;
  // The block stays cached in its segment, merged with its free neighbours:
  // the surviving free block grows in place.
  Block* prev = b->prev && !b->prev->allocated ? b->prev : nullptr;
  Block* next = b->next && !b->next->allocated ? b->next : nullptr;
  if (prev) {
    uint64_t size = prev->size + b->size;
    dropBlock(b);
    if (next) {
      size += next->size;
      removeFree(next);
      dropBlock(next);
    }
    resizeFree(prev, prev->offset, size);
  } else if (next) {
    const uint64_t offset = b->offset, size = next->size + b->size;
    dropBlock(b);
    resizeFree(next, offset, size);
  } else {
    addFree(b);
  }
  return result;
}

uint64_t CachingAllocator::emptyCache() {
  uint64_t released;
  {
    std::lock_guard<SpinLock> g(mu_);
    released = releaseFreeSegments();
  }
  arena_.releaseFreePages();
  return released;
}

std::vector<GuardDamage> CachingAllocator::checkGuards() const {
  std::lock_guard<SpinLock> g(mu_);
  std::vector<GuardDamage> out;
  HostAccess access;
  for (const Segment* s = segments_; s; s = s->next)
    for (const Block* b = s->first; b; b = b->next) {
      if (!b->allocated || !b->guarded) continue;
      int64_t at = firstDamagedByte(*b);
      if (at != kIntact) out.push_back({arena_.base() + b->data, b->requested, at});
    }
  return out;
}

void CachingAllocator::countOom() { std::lock_guard<SpinLock> g(mu_); stats_.num_ooms++; }
void CachingAllocator::countRetry() { std::lock_guard<SpinLock> g(mu_); stats_.num_alloc_retries++; }
void CachingAllocator::countRequest() { std::lock_guard<SpinLock> g(mu_); stats_.allocation_requests++; }

uint64_t CachingAllocator::reservedBytes() const {
  std::lock_guard<SpinLock> g(mu_);
  return static_cast<uint64_t>(stats_.reserved_bytes.all.current);
}

uint64_t CachingAllocator::largestFreeBlock() const {
  const uint64_t limit = arena_.limit(), held = arena_.bytesInUse();
  const uint64_t room = limit > held ? limit - held : 0;  // set_per_process_memory_fraction
  uint64_t largest = std::min(arena_.largestFreeBlock(), room);
  std::lock_guard<SpinLock> g(mu_);
  for (const FreeSet& set : free_)
    if (!set.empty() && (*set.rbegin())->size > largest) largest = (*set.rbegin())->size;
  return largest;
}

AllocatorStats CachingAllocator::stats() const {
  const auto largest = static_cast<int64_t>(largestFreeBlock());
  std::lock_guard<SpinLock> g(mu_);
  AllocatorStats s = stats_;
  s.active = s.allocation;  // every live block is active: no stream holds a freed one back
  s.largest_free_block = largest;
  return s;
}

void CachingAllocator::resetPeak() {
  std::lock_guard<SpinLock> g(mu_);
  for (PoolStat* p : {&stats_.reserved_bytes, &stats_.allocated_bytes, &stats_.active_bytes,
                      &stats_.inactive_split_bytes, &stats_.segment, &stats_.allocation, &stats_.active,
                      &stats_.inactive_split})
    p->resetPeak();
}

void CachingAllocator::resetAccumulated() {
  std::lock_guard<SpinLock> g(mu_);
  for (PoolStat* p : {&stats_.reserved_bytes, &stats_.allocated_bytes, &stats_.active_bytes,
                      &stats_.inactive_split_bytes, &stats_.segment, &stats_.allocation, &stats_.active,
                      &stats_.inactive_split})
    p->resetAccumulated();
  stats_.allocation_requests = stats_.num_tensor_frees = stats_.num_ooms = stats_.num_alloc_retries = 0;
  stats_.num_device_alloc = stats_.num_device_free = 0;
}

std::vector<SegmentInfo> CachingAllocator::segments() const {
  std::lock_guard<SpinLock> g(mu_);
  std::vector<SegmentInfo> out;
  for (const Segment* s = segments_; s; s = s->next) {
    SegmentInfo info{s->offset, s->size, s->pool, {}};
    for (const Block* b = s->first; b; b = b->next)
      info.blocks.push_back(b->allocated ? BlockInfo{b->offset, b->size, b->requested, true, b->data}
                                         : BlockInfo{b->offset, b->size, 0, false, b->offset});
    out.push_back(std::move(info));
  }
  // Address order, as torch.cuda's snapshots list them.
  std::sort(out.begin(), out.end(), [](const SegmentInfo& a, const SegmentInfo& b) { return a.offset < b.offset; });
  return out;
}

}  // namespace neuron_sim::runtime
