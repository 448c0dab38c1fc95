// PrivateUse1HooksInterface: the questions PyTorch's core asks a backend
// (is it available, how many devices, which generator, is this pointer
// pinned) without knowing anything about it.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "aten/device/generator.h"
#include "aten/memory/allocator.h"
#include "aten/memory/pinned_memory.h"
#include "aten/neuron.h"
#include "aten/runtime_call.h"
#include "runtime/device.h"
#include "runtime/host_access.h"

namespace neuron_sim {
namespace {

struct NeuronHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override {
    try { return runtime::deviceCount() > 0; } catch (...) { return false; }
  }
  c10::DeviceIndex deviceCount() const override {
    try { return static_cast<c10::DeviceIndex>(runtime::deviceCount()); } catch (...) { return 0; }
  }
  void setCurrentDevice(c10::DeviceIndex d) const override {
    runtimeCall([&] { runtime::setCurrentDevice(d); });
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
    // Only arenas already reserved can hold the pointer; never reserve one here.
    if (runtime::CachingAllocator* owner = runtime::allocatorOwning(data))
      for (int i = 0; i < runtime::deviceCount(); ++i)
        if (runtime::reservedAllocator(i) == owner) return neuronDevice(i);
    TORCH_CHECK(false, "pointer ", data, " does not lie in any neuron device's HBM arena");
  }
  bool isPinnedPtr(const void* data) const override { return isPinnedHostPtr(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinnedHostAllocator(); }
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
