// PrivateUse1HooksInterface: the questions PyTorch's core asks a backend
// (is it available, how many devices, which generator, is this pointer
// pinned) without knowing anything about it.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "../runtime/device.h"
#include "../runtime/host_access.h"
#include "generator.h"
#include "neuron.h"

namespace neuron_sim {
namespace {

// Page-locked host memory has no meaning without DMA; what users rely on is
// that pin_memory() returns a tensor that reports is_pinned().
class PinnedHostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    void* p = nullptr;
    if (n > 0 && posix_memalign(&p, 64, n) != 0) TORCH_CHECK_WITH(OutOfMemoryError, false, "pinned host allocation of ", n, " bytes failed");
    if (p) {
      std::lock_guard<std::mutex> g(mu());
      live().insert(p);
    }
    return c10::DataPtr(p, p, &release, c10::Device(c10::kCPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dst, const void* src, std::size_t n) const override { std::memcpy(dst, src, n); }
  static bool isPinned(const void* p) {
    std::lock_guard<std::mutex> g(mu());
    return live().count(const_cast<void*>(p)) > 0;
  }

 private:
  static std::mutex& mu() { static std::mutex m; return m; }
  static std::unordered_set<void*>& live() { static std::unordered_set<void*> s; return s; }
  static void release(void* p) {
    if (!p) return;
    { std::lock_guard<std::mutex> g(mu()); live().erase(p); }
    std::free(p);
  }
};

PinnedHostAllocator g_pinned;

struct NeuronHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override {
    try { return runtime::deviceCount() > 0; } catch (...) { return false; }
  }
  c10::DeviceIndex deviceCount() const override {
    try { return static_cast<c10::DeviceIndex>(runtime::deviceCount()); } catch (...) { return 0; }
  }
  void setCurrentDevice(c10::DeviceIndex d) const override {
    try { runtime::setCurrentDevice(d); } catch (const std::exception& e) { TORCH_CHECK_INDEX(false, e.what()); }
  }
  c10::DeviceIndex getCurrentDevice() const override { return static_cast<c10::DeviceIndex>(runtime::currentDevice()); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    auto old = getCurrentDevice();
    setCurrentDevice(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return runtime::isInitialized(); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override { return defaultGenerator(index); }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    if (index < 0) index = getCurrentDevice();
    return at::make_generator<NeuronGeneratorImpl>(index, c10::detail::getNonDeterministicRandom());
  }
  at::Device getDeviceFromPtr(void* data) const override {
    for (int i = 0; i < runtime::deviceCount(); ++i)
      if (runtime::isInitialized() && runtime::arenaOwning(data) == &runtime::arena(i)) return neuronDevice(i);
    TORCH_CHECK(false, "pointer ", data, " does not lie in any neuron device's HBM arena");
  }
  bool isPinnedPtr(const void* data) const override { return PinnedHostAllocator::isPinned(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned; }
  void init() const override {}
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    c10::StorageImpl* s = storage.unsafeGetStorageImpl();
    TORCH_CHECK(s->resizable(), "Trying to resize storage that is not resizable");
    int device = s->device().index();
    c10::DataPtr fresh = allocateOn(device, newsize, neuronDevice(device));
    size_t keep = std::min(newsize, s->nbytes());
    runtime::HostAccess access;  // NEURON_SIM_PROTECT
    if (keep > 0) std::memcpy(fresh.get(), s->data(), keep);
    s->set_data_ptr_noswap(std::move(fresh));
    s->set_nbytes(newsize);
  }
};

// Registered when the extension loads, before any tensor can reach us.
const bool g_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new NeuronHooks());
  return true;
}();

}  // namespace
}  // namespace neuron_sim
