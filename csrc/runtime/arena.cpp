#include "runtime/arena.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "runtime/host_access.h"

namespace neuron_sim::runtime {

bool Arena::BySize::operator()(const Block* a, const Block* b) const {
  return a->size != b->size ? a->size < b->size : a->offset < b->offset;
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

void* Arena::allocate(uint64_t requested) {
  const uint64_t size = (requested + kAlignment - 1) / kAlignment * kAlignment;
  std::lock_guard<SpinLock> g(mu_);
  if (requested == 0 || in_use_ + size > limit_) return nullptr;
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
  b->allocated = true;
  b->data = b->offset;
  live_.insert(b);
  in_use_ += size;
  return reinterpret_cast<void*>(base_ + b->offset);
}

void Arena::free(void* ptr) {
  std::lock_guard<SpinLock> g(mu_);
  const uint64_t offset = reinterpret_cast<uintptr_t>(ptr) - base_;
  Block* b = live_.find(offset);
  if (b == nullptr)
    throw std::runtime_error("free of a pointer that is not a live block of this arena");
  live_.erase(offset);
  in_use_ -= b->size;
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

uint64_t Arena::bytesInUse() const {
  std::lock_guard<SpinLock> g(mu_);
  return in_use_;
}

uint64_t Arena::largestFreeBlock() const {
  std::lock_guard<SpinLock> g(mu_);
  return free_.empty() ? 0 : (*free_.rbegin())->size;
}

}  // namespace neuron_sim::runtime
