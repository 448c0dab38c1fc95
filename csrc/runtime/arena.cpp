#include "runtime/arena.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "runtime/debug_modes.h"
#include "runtime/host_access.h"

namespace neuron_sim::runtime {

bool Arena::BySize::operator()(const Block* a, const Block* b) const {
  return a->size != b->size ? a->size < b->size : a->offset < b->offset;
}

Arena::LiveIndex::LiveIndex() : slots_(1024, nullptr), shift_(64 - 10) {}

void Arena::LiveIndex::insert(Block* b) {
  if (2 * (count_ + 1) > slots_.size()) grow();
  const size_t mask = slots_.size() - 1;
  size_t i = slot(b->data);
  while (slots_[i]) i = (i + 1) & mask;
  slots_[i] = b;
  ++count_;
}

Arena::Block* Arena::LiveIndex::find(uint64_t data) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = slot(data); slots_[i]; i = (i + 1) & mask)
    if (slots_[i]->data == data) return slots_[i];
  return nullptr;
}

void Arena::LiveIndex::erase(uint64_t data) {
  const size_t mask = slots_.size() - 1;
  size_t i = slot(data);
  while (slots_[i]->data != data) i = (i + 1) & mask;  // callers erase only what find() found
  // Backward-shift deletion: move later entries of the probe run into the
  // hole, so lookups never need tombstones.
  for (size_t j = (i + 1) & mask; slots_[j]; j = (j + 1) & mask) {
    const size_t home = slot(slots_[j]->data);
    if (((j - home) & mask) >= ((j - i) & mask)) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i] = nullptr;
  --count_;
}

void Arena::LiveIndex::grow() {
  std::vector<Block*> old(slots_.size() * 2, nullptr);
  old.swap(slots_);
  --shift_;
  count_ = 0;
  for (Block* b : old)
    if (b) insert(b);
}

Arena::Arena(uint64_t capacity) : capacity_(capacity), limit_(capacity) {
  // MAP_NORESERVE: the capacity is address space, not RAM. A 24 GiB device
  // costs host memory only for pages a kernel actually touches.
  void* p = mmap(nullptr, capacity_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw std::runtime_error("could not reserve " + std::to_string(capacity_) +
                             " bytes of address space for a simulated HBM arena: " + std::strerror(errno) +
                             ". Lower NEURON_SIM_HBM_GB or the number of devices");
  base_ = reinterpret_cast<uintptr_t>(p);
  spare_nodes_.reserve(kSpareNodes);
  first_ = new Block{};
  first_->size = capacity_;
  addFree(first_);
  registerProtectedRange(base_, capacity_);
}

Arena::~Arena() {
  munmap(reinterpret_cast<void*>(base_), capacity_);
  free_.clear();
  for (Block* b = first_; b;) {
    Block* next = b->next;
    delete b;
    b = next;
  }
  for (Block* b : spare_blocks_) delete b;
}

Arena::Block* Arena::newBlock() {
  if (spare_blocks_.empty()) return new Block{};
  Block* b = spare_blocks_.back();
  spare_blocks_.pop_back();
  *b = Block{};
  return b;
}

void Arena::recycle(Block* b) {
  if (b->prev) b->prev->next = b->next;
  else first_ = b->next;
  if (b->next) b->next->prev = b->prev;
  if (spare_blocks_.size() < kSpareNodes) spare_blocks_.push_back(b);
  else delete b;
}

void Arena::addFree(Block* b) {
  b->allocated = false;
  if (spare_nodes_.empty()) {
    b->pos = free_.insert(b).first;
  } else {
    auto node = std::move(spare_nodes_.back());
    spare_nodes_.pop_back();
    node.value() = b;
    b->pos = free_.insert(std::move(node)).position;
  }
}

void Arena::removeFree(Block* b) {
  auto node = free_.extract(b->pos);
  if (spare_nodes_.size() < kSpareNodes) spare_nodes_.push_back(std::move(node));
}

void Arena::refit(Block* b, bool grew) {
  // A block that grew can only have passed its successors, one that shrank
  // its predecessors. Usually it passed none (the arena's tail range shrinks
  // and grows back, and stays the largest): then the tree is left untouched.
  const BySize less;
  auto it = b->pos;
  const bool in_place = grew ? std::next(it) == free_.end() || less(b, *std::next(it))
                             : it == free_.begin() || less(*std::prev(it), b);
  if (in_place) return;
  auto node = free_.extract(it);
  b->pos = free_.insert(std::move(node)).position;
}

void* Arena::allocate(uint64_t requested, uintptr_t* block_start) {
  const uint32_t modes = debugModes();
  const bool guarded = (modes & kGuard) != 0;
  const uint64_t front = guarded ? kGuardBytes : 0;
  // A guarded block has kGuardBytes before the data and at least as many after.
  const uint64_t size = (requested + 2 * front + kAlignment - 1) / kAlignment * kAlignment;
  uint64_t offset;
  {
    std::lock_guard<SpinLock> g(mu_);
    stats_.allocation_requests++;
    if (requested == 0) return nullptr;
    if (static_cast<uint64_t>(stats_.reserved_bytes.current) + size > limit_) return nullptr;
    Block probe;
    probe.size = size;
    auto it = free_.lower_bound(&probe);
    if (it == free_.end()) return nullptr;
    Block* f = *it;
    Block* b;
    if (f->size == size) {
      removeFree(f);
      b = f;
    } else {
      // Split: the front of the free block becomes the new block, the rest stays free.
      b = newBlock();
      b->offset = f->offset;
      b->size = size;
      b->prev = f->prev;
      b->next = f;
      if (f->prev) f->prev->next = b;
      else first_ = b;
      f->prev = b;
      f->offset += size;
      f->size -= size;
      refit(f, /*grew=*/false);
    }
    offset = b->offset;
    b->allocated = true;
    b->guarded = guarded;
    b->requested = requested;
    b->data = offset + front;
    live_.insert(b);
    stats_.allocated_bytes.add(static_cast<int64_t>(requested));
    stats_.active_bytes.add(static_cast<int64_t>(requested));
    stats_.reserved_bytes.add(static_cast<int64_t>(size));
  }
  auto* block = reinterpret_cast<unsigned char*>(base_ + offset);
  if (block_start) *block_start = base_ + offset;
  if (modes & (kGuard | kPoison)) {
    // The block is ours alone until we return it: no lock needed to fill it.
    HostAccess access;
    if (guarded) {
      std::memset(block, kGuardByte, front);
      std::memset(block + front + requested, kGuardByte, size - front - requested);
    }
    if (modes & kPoison) std::memset(block + front, kPoisonByte, requested);
  }
  return block + front;
}

int64_t Arena::firstDamagedByte(const Block& b) const {
  const auto* block = reinterpret_cast<const unsigned char*>(base_ + b.offset);
  const uint64_t front = b.data - b.offset;
  for (uint64_t i = 0; i < front; ++i)
    if (block[i] != kGuardByte) return static_cast<int64_t>(i) - static_cast<int64_t>(front);
  for (uint64_t i = front + b.requested; i < b.size; ++i)
    if (block[i] != kGuardByte) return static_cast<int64_t>(i - front);
  return kIntact;
}

FreedBlock Arena::free(void* ptr) {
  std::lock_guard<SpinLock> g(mu_);
  const uint64_t data_offset = reinterpret_cast<uintptr_t>(ptr) - base_;
  Block* b = live_.find(data_offset);
  if (b == nullptr)
    throw std::runtime_error("free of a pointer that is not a live block of this arena");
  FreedBlock result;
  result.block = base_ + b->offset;
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
    if (poison) std::memset(reinterpret_cast<void*>(base_ + b->offset), kPoisonByte, b->size);
  }
  live_.erase(data_offset);
  stats_.allocated_bytes.sub(static_cast<int64_t>(b->requested));
  stats_.active_bytes.sub(static_cast<int64_t>(b->requested));
  stats_.reserved_bytes.sub(static_cast<int64_t>(b->size));
  stats_.num_tensor_frees++;
  // Coalesce with the free neighbours on both sides: the surviving free
  // block grows in place and usually keeps its place in free_.
  Block* prev = b->prev && !b->prev->allocated ? b->prev : nullptr;
  Block* next = b->next && !b->next->allocated ? b->next : nullptr;
  if (prev) {
    prev->size += b->size;
    recycle(b);
    if (next) {
      prev->size += next->size;
      removeFree(next);
      recycle(next);
    }
    refit(prev, /*grew=*/true);
  } else if (next) {
    next->offset = b->offset;
    next->size += b->size;
    recycle(b);
    refit(next, /*grew=*/true);
  } else {
    addFree(b);
  }
  return result;
}

std::vector<GuardDamage> Arena::checkGuards() const {
  std::lock_guard<SpinLock> g(mu_);
  std::vector<GuardDamage> out;
  HostAccess access;
  for (const Block* b = first_; b; b = b->next) {
    if (!b->allocated || !b->guarded) continue;
    int64_t at = firstDamagedByte(*b);
    if (at != kIntact) out.push_back({base_ + b->data, b->requested, at});
  }
  return out;
}

void Arena::setLimit(uint64_t bytes) {
  std::lock_guard<SpinLock> g(mu_);
  limit_ = bytes < capacity_ ? bytes : capacity_;
}

uint64_t Arena::limit() const {
  std::lock_guard<SpinLock> g(mu_);
  return limit_;
}

void Arena::releaseFreePages() {
  std::lock_guard<SpinLock> g(mu_);
  const uint64_t page = 4096;
  for (const Block* b : free_) {
    uint64_t lo = (b->offset + page - 1) / page * page, hi = (b->offset + b->size) / page * page;
    if (hi > lo) madvise(reinterpret_cast<void*>(base_ + lo), hi - lo, MADV_DONTNEED);
  }
}

void Arena::countRetry() {
  std::lock_guard<SpinLock> g(mu_);
  stats_.num_alloc_retries++;
}

void Arena::countRequest() {
  std::lock_guard<SpinLock> g(mu_);
  stats_.allocation_requests++;
}

void Arena::countOom() {
  std::lock_guard<SpinLock> g(mu_);
  stats_.num_ooms++;
}

uint64_t Arena::bytesInUse() const {
  std::lock_guard<SpinLock> g(mu_);
  return static_cast<uint64_t>(stats_.reserved_bytes.current);
}

uint64_t Arena::largestFreeBlock() const {
  std::lock_guard<SpinLock> g(mu_);
  return free_.empty() ? 0 : (*free_.rbegin())->size;
}

ArenaStats Arena::stats() const {
  std::lock_guard<SpinLock> g(mu_);
  ArenaStats s = stats_;
  s.num_segments = 1;
  s.num_free_blocks = static_cast<int64_t>(free_.size());
  s.largest_free_block = free_.empty() ? 0 : static_cast<int64_t>((*free_.rbegin())->size);
  return s;
}

void Arena::resetPeak() {
  std::lock_guard<SpinLock> g(mu_);
  stats_.allocated_bytes.resetPeak();
  stats_.reserved_bytes.resetPeak();
  stats_.active_bytes.resetPeak();
}

void Arena::resetAccumulated() {
  std::lock_guard<SpinLock> g(mu_);
  for (Stat* s : {&stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes}) s->resetAccumulated();
  stats_.allocation_requests = stats_.num_tensor_frees = stats_.num_ooms = stats_.num_alloc_retries = 0;
}

std::vector<BlockInfo> Arena::blocks() const {
  std::lock_guard<SpinLock> g(mu_);
  std::vector<BlockInfo> out;
  for (const Block* b = first_; b; b = b->next)
    out.push_back(b->allocated ? BlockInfo{b->offset, b->size, b->requested, true, b->data}
                               : BlockInfo{b->offset, b->size, 0, false, b->offset});
  return out;
}

}  // namespace neuron_sim::runtime
