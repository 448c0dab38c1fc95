#include "runtime/arena.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "runtime/debug_modes.h"
#include "runtime/host_access.h"

namespace neuron_sim::runtime {

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
  spare_live_.reserve(kSpareNodes);
  insertFree(0, capacity_);
  registerProtectedRange(base_, capacity_);
}

Arena::~Arena() { munmap(reinterpret_cast<void*>(base_), capacity_); }

void Arena::insertFree(uint64_t offset, uint64_t size) {
  free_by_offset_.emplace(offset, size);
  free_by_size_.emplace(size, offset);
}

void Arena::eraseFree(uint64_t offset, uint64_t size) {
  free_by_offset_.erase(offset);
  free_by_size_.erase({size, offset});
}

void* Arena::allocate(uint64_t requested, uintptr_t* block_start) {
  const uint32_t modes = debugModes();
  const bool guarded = (modes & kGuard) != 0;
  const uint64_t front = guarded ? kGuardBytes : 0;
  // A guarded block has kGuardBytes before the data and at least as many after.
  const uint64_t size = (requested + 2 * front + kAlignment - 1) / kAlignment * kAlignment;
  uint64_t offset;
  {
    std::lock_guard<std::mutex> g(mu_);
    stats_.allocation_requests++;
    if (requested == 0) return nullptr;
    if (static_cast<uint64_t>(stats_.reserved_bytes.current) + size > limit_) return nullptr;
    auto it = free_by_size_.lower_bound({size, 0});
    if (it == free_by_size_.end()) return nullptr;
    const uint64_t free_size = it->first;
    offset = it->second;
    // Split by re-keying the free range's own nodes: no node is allocated.
    auto by_size = free_by_size_.extract(it);
    auto by_offset = free_by_offset_.extract(offset);
    if (free_size > size) {
      by_size.value() = {free_size - size, offset + size};
      free_by_size_.insert(std::move(by_size));
      by_offset.key() = offset + size;
      by_offset.mapped() = free_size - size;
      free_by_offset_.insert(std::move(by_offset));
    }
    if (spare_live_.empty()) {
      live_.emplace(offset + front, Live{offset, size, requested, guarded});
    } else {
      auto node = std::move(spare_live_.back());
      spare_live_.pop_back();
      node.key() = offset + front;
      node.mapped() = Live{offset, size, requested, guarded};
      live_.insert(std::move(node));
    }
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

int64_t Arena::firstDamagedByte(uint64_t data_offset, const Live& b) const {
  const auto* block = reinterpret_cast<const unsigned char*>(base_ + b.offset);
  const uint64_t front = data_offset - b.offset;
  for (uint64_t i = 0; i < front; ++i)
    if (block[i] != kGuardByte) return static_cast<int64_t>(i) - static_cast<int64_t>(front);
  for (uint64_t i = front + b.requested; i < b.size; ++i)
    if (block[i] != kGuardByte) return static_cast<int64_t>(i - front);
  return kIntact;
}

FreedBlock Arena::free(void* ptr) {
  std::lock_guard<std::mutex> g(mu_);
  const uint64_t data_offset = reinterpret_cast<uintptr_t>(ptr) - base_;
  auto it = live_.find(data_offset);
  if (it == live_.end())
    throw std::runtime_error("free of a pointer that is not a live block of this arena");
  const Live b = it->second;
  FreedBlock result;
  result.block = base_ + b.offset;
  result.requested = b.requested;
  result.size = b.size;
  const bool poison = debugMode(kPoison);
  if (b.guarded || poison) {
    HostAccess access;
    if (b.guarded) {
      int64_t at = firstDamagedByte(data_offset, b);
      result.guard_damaged = at != kIntact;
      result.first_damaged_byte = result.guard_damaged ? at : 0;
    }
    // Reads of freed memory through a stale pointer now see NaN.
    if (poison) std::memset(reinterpret_cast<void*>(base_ + b.offset), kPoisonByte, b.size);
  }
  if (spare_live_.size() < kSpareNodes) spare_live_.push_back(live_.extract(it));
  else live_.erase(it);
  stats_.allocated_bytes.sub(static_cast<int64_t>(b.requested));
  stats_.active_bytes.sub(static_cast<int64_t>(b.requested));
  stats_.reserved_bytes.sub(static_cast<int64_t>(b.size));
  stats_.num_tensor_frees++;
  // Coalesce with the free neighbours on both sides. A neighbour's nodes are
  // re-keyed for the merged range, so the common cases allocate no node.
  uint64_t start = b.offset, size = b.size;
  auto next = free_by_offset_.lower_bound(start);
  auto prev = next;
  const bool merge_prev = prev != free_by_offset_.begin() && (--prev, prev->first + prev->second == start);
  const bool merge_next = next != free_by_offset_.end() && next->first == start + size;
  if (merge_prev) {
    // The previous range grows in place: its offset key stays, its size changes.
    const uint64_t psize = prev->second;
    size += psize;
    start = prev->first;
    if (merge_next) {
      size += next->second;
      eraseFree(next->first, next->second);
    }
    auto node = free_by_size_.extract({psize, start});
    node.value() = {size, start};
    free_by_size_.insert(std::move(node));
    prev->second = size;
  } else if (merge_next) {
    const uint64_t noff = next->first, nsize = next->second;
    size += nsize;
    auto by_offset = free_by_offset_.extract(next);
    by_offset.key() = start;
    by_offset.mapped() = size;
    free_by_offset_.insert(std::move(by_offset));
    auto by_size = free_by_size_.extract({nsize, noff});
    by_size.value() = {size, start};
    free_by_size_.insert(std::move(by_size));
  } else {
    insertFree(start, size);
  }
  return result;
}

std::vector<GuardDamage> Arena::checkGuards() const {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<GuardDamage> out;
  HostAccess access;
  for (const auto& [data_offset, b] : live_) {
    if (!b.guarded) continue;
    int64_t at = firstDamagedByte(data_offset, b);
    if (at != kIntact) out.push_back({base_ + data_offset, b.requested, at});
  }
  return out;
}

void Arena::setLimit(uint64_t bytes) {
  std::lock_guard<std::mutex> g(mu_);
  limit_ = bytes < capacity_ ? bytes : capacity_;
}

uint64_t Arena::limit() const {
  std::lock_guard<std::mutex> g(mu_);
  return limit_;
}

void Arena::releaseFreePages() {
  std::lock_guard<std::mutex> g(mu_);
  const uint64_t page = 4096;
  for (auto [offset, size] : free_by_offset_) {
    uint64_t lo = (offset + page - 1) / page * page, hi = (offset + size) / page * page;
    if (hi > lo) madvise(reinterpret_cast<void*>(base_ + lo), hi - lo, MADV_DONTNEED);
  }
}

void Arena::countRetry() {
  std::lock_guard<std::mutex> g(mu_);
  stats_.num_alloc_retries++;
}

void Arena::countRequest() {
  std::lock_guard<std::mutex> g(mu_);
  stats_.allocation_requests++;
}

void Arena::countOom() {
  std::lock_guard<std::mutex> g(mu_);
  stats_.num_ooms++;
}

uint64_t Arena::bytesInUse() const {
  std::lock_guard<std::mutex> g(mu_);
  return static_cast<uint64_t>(stats_.reserved_bytes.current);
}

uint64_t Arena::largestFreeBlock() const {
  std::lock_guard<std::mutex> g(mu_);
  return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
}

ArenaStats Arena::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  ArenaStats s = stats_;
  s.num_segments = 1;
  s.num_free_blocks = static_cast<int64_t>(free_by_offset_.size());
  s.largest_free_block = free_by_size_.empty() ? 0 : static_cast<int64_t>(free_by_size_.rbegin()->first);
  return s;
}

void Arena::resetPeak() {
  std::lock_guard<std::mutex> g(mu_);
  stats_.allocated_bytes.resetPeak();
  stats_.reserved_bytes.resetPeak();
  stats_.active_bytes.resetPeak();
}

void Arena::resetAccumulated() {
  std::lock_guard<std::mutex> g(mu_);
  for (Stat* s : {&stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes}) s->resetAccumulated();
  stats_.allocation_requests = stats_.num_tensor_frees = stats_.num_ooms = stats_.num_alloc_retries = 0;
}

std::vector<BlockInfo> Arena::blocks() const {
  std::lock_guard<std::mutex> g(mu_);
  std::map<uint64_t, BlockInfo> all;
  for (auto [off, size] : free_by_offset_) all.emplace(off, BlockInfo{off, size, 0, false, off});
  for (auto& [data, b] : live_) all.emplace(b.offset, BlockInfo{b.offset, b.size, b.requested, true, data});
  std::vector<BlockInfo> out;
  out.reserve(all.size());
  for (auto& [off, b] : all) out.push_back(b);
  return out;
}

}  // namespace neuron_sim::runtime
