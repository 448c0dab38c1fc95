// Live blocks by the offset of their data: open addressing over a
// power-of-two table (a multiply and a shift per lookup; std::unordered_map
// divides). T has a `uint64_t data` member, unique among the live entries.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace neuron_sim::runtime {

template <class T>
class LiveIndex {
 public:
  LiveIndex() : slots_(1024, nullptr), shift_(64 - 10) {}

  void insert(T* b) {
    if (2 * (count_ + 1) > slots_.size()) grow();
    const size_t mask = slots_.size() - 1;
    size_t i = slot(b->data);
    while (slots_[i]) i = (i + 1) & mask;
    slots_[i] = b;
    ++count_;
  }

  T* find(uint64_t data) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = slot(data); slots_[i]; i = (i + 1) & mask)
      if (slots_[i]->data == data) return slots_[i];
    return nullptr;
  }

  // Callers erase only what find() found.
  void erase(uint64_t data) {
    const size_t mask = slots_.size() - 1;
    size_t i = slot(data);
    while (slots_[i]->data != data) i = (i + 1) & mask;
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

 private:
  // Data offsets are multiples of 256 B: the low bits carry nothing.
  size_t slot(uint64_t data) const { return static_cast<size_t>((data >> 8) * 0x9E3779B97F4A7C15ULL >> shift_); }
  void grow() {
    std::vector<T*> old(slots_.size() * 2, nullptr);
    old.swap(slots_);
    --shift_;
    count_ = 0;
    for (T* b : old)
      if (b) insert(b);
  }
  std::vector<T*> slots_;
  size_t count_ = 0;
  int shift_;
};

}  // namespace neuron_sim::runtime
