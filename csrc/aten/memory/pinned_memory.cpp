// Pinned host memory. On hardware, page-locked memory lets the DMA engines
// copy without staging, which is what makes non_blocking host-to-device
// copies asynchronous. The emulator's copies are memcpy and synchronous, so
// what users rely on is the bookkeeping: pin_memory() returns a new tensor
// that reports is_pinned(), views and storage slices of it are pinned, and
// ordinary host memory is not.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "aten/memory/pinned_memory.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace neuron_sim {
namespace {

class PinnedHostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    void* p = nullptr;
    if (n > 0) {
      TORCH_CHECK_WITH(OutOfMemoryError, posix_memalign(&p, 64, n) == 0, "pinned host allocation of ", n,
                       " bytes failed");
      std::lock_guard<std::mutex> g(mu());
      live()[reinterpret_cast<uintptr_t>(p)] = n;
    }
    return c10::DataPtr(p, p, &release, c10::Device(c10::kCPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dst, const void* src, std::size_t n) const override { std::memcpy(dst, src, n); }

  static bool contains(const void* ptr) {
    const auto a = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> g(mu());
    auto it = live().upper_bound(a);  // first block starting after a
    if (it == live().begin()) return false;
    --it;
    return a < it->first + it->second;
  }

 private:
  static std::mutex& mu() { static std::mutex m; return m; }
  // start address -> size of each live pinned block
  static std::map<uintptr_t, size_t>& live() { static std::map<uintptr_t, size_t> m; return m; }
  static void release(void* p) {
    if (!p) return;
    {
      std::lock_guard<std::mutex> g(mu());
      live().erase(reinterpret_cast<uintptr_t>(p));
    }
    std::free(p);
  }
};

PinnedHostAllocator g_pinned;

}  // namespace

c10::Allocator* pinnedHostAllocator() { return &g_pinned; }
bool isPinnedHostPtr(const void* p) { return p && PinnedHostAllocator::contains(p); }

}  // namespace neuron_sim
