// c10's DeviceGuardImplInterface for PrivateUse1: how PyTorch switches the
// current neuron device and stream (device guards, autograd's device threads,
// torch.accelerator), and how it records and waits on events.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <array>
#include <cstdlib>
#include <string>
#include <mutex>

#include "aten/device/guard.h"
#include "aten/execution/adaptive_eager.h"
#include "aten/neuron.h"
#include "aten/runtime_call.h"
#include "runtime/device.h"
#include "runtime/device_timeline.h"
#include "runtime/environment.h"
#include "runtime/stream.h"

namespace neuron_sim {
namespace {

using runtime::kMaxDevices;

thread_local std::array<c10::StreamId, kMaxDevices> t_current_stream{};  // 0: default stream

// NEURON_RT_ENABLE_HOST_CC, read at each stream creation: unless it is
// exactly "1", the runtime runs one stream per device and every new stream is
// the default stream. A program that sets it after import gets distinct
// streams from then on (creating a stream is not on the per-op path).
bool multiStream() { return runtime::runtimeSwitch("NEURON_RT_ENABLE_HOST_CC"); }

runtime::StreamRef ref(const c10::Stream& s) { return {s.device_index(), s.id()}; }

void checkIndex(c10::DeviceIndex index) {
  runtimeCall([&] { runtime::checkDevice(index); });
}

struct NeuronGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }

  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    if (old.index() != d.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return neuronDevice(runtime::currentDevice()); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kNeuron, "Expected neuron device but got: ", d);
    checkIndex(d.index());
    runtime::setCurrentDevice(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    try { runtime::setCurrentDevice(d.index()); } catch (...) {}
  }

  // A stream's device may come without an index (torch.Stream(device="neuron")):
  // it then means the current device, as for cuda.
  static c10::Device resolved(c10::Device d) {
    if (d.has_index()) {
      checkIndex(d.index());
      return d;
    }
    return neuronDevice(runtime::currentDevice());
  }
  c10::Stream getStream(c10::Device d) const override {
    d = resolved(d);
    return c10::Stream(c10::Stream::UNSAFE, d, t_current_stream[d.index()]);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::UNSAFE, resolved(d), 0);
  }
  c10::Stream getNewStream(c10::Device d, int /*priority*/) const override {
    d = resolved(d);
    if (!multiStream()) return c10::Stream(c10::Stream::UNSAFE, d, 0);
    return c10::Stream(c10::Stream::UNSAFE, d, runtime::newStreamId(d.index()));
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool is_high_priority) const override {
    return getNewStream(d, is_high_priority ? -1 : 0);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    c10::Device d = resolved(s.device());
    auto old = getStream(d);
    t_current_stream[d.index()] = s.id();
    return old;
  }

  // Events: kernels complete when launched, so recording an event stamps the
  // time, and every wait or query on a recorded event is already satisfied.
  // c10::InlineEvent has already checked the timing flags and that both
  // events were recorded before elapsedTime is asked.
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "Event device index ", device_index, " does not match recording stream's device index ",
                stream.device_index(), ".");
    checkIndex(stream.device_index());
    auto* e = static_cast<runtime::Event*>(*event);
    if (!e) *event = e = new runtime::Event();
    e->device = stream.device_index();
    e->stream = stream.id();
    e->timing = flag == c10::EventFlag::BACKEND_DEFAULT;
    runtime::recordEvent(*e);
    e->model_ns = C10_UNLIKELY(runtime::timelineActive()) && runtime::modelClockOn()
                      ? runtime::modelClockNs(e->device, e->stream) : -1;
    if (C10_UNLIKELY(runtime::orderTracking())) e->clock = runtime::clockOf(ref(stream));
  }
  // The work an event marks is done when it is recorded: nothing to wait for,
  // except in the stream-order checker's books.
  void block(void* event, const c10::Stream& stream) const override {
    if (!event) return;
    checkIndex(stream.device_index());
    if (C10_UNLIKELY(runtime::orderTracking()))
      runtime::mergeInto(ref(stream), static_cast<runtime::Event*>(event)->clock);
  }
  bool queryEvent(void* event) const override {
    if (C10_UNLIKELY(runtime::orderTracking()) && event)
      runtime::completeClock(static_cast<runtime::Event*>(event)->clock);  // the host saw it done
    return true;
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<runtime::Event*>(event);
  }
  void synchronizeEvent(void* event) const override {
    flushAllPoint(runtime::adaptive::Flush::kSynchronize);
    if (C10_UNLIKELY(runtime::orderTracking()) && event)
      runtime::completeClock(static_cast<runtime::Event*>(event)->clock);
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    auto* a = static_cast<runtime::Event*>(start);
    auto* b = static_cast<runtime::Event*>(end);
    TORCH_CHECK(a && b && a->recorded && b->recorded,
                "Both events must be recorded before calculating elapsed time.");
    TORCH_CHECK(a->device == b->device, "elapsed_time: the events were recorded on different devices (neuron:",
                a->device, " and neuron:", b->device, "); time events recorded on the same device.");
    return runtime::elapsedMs(*a, *b);
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    try { return static_cast<c10::DeviceIndex>(runtime::deviceCount()); } catch (...) { return 0; }
  }
  bool queryStream(const c10::Stream& s) const override {
    checkIndex(s.device_index());
    if (C10_UNLIKELY(runtime::orderTracking())) runtime::completeStream(ref(s));
    return true;
  }
  void synchronizeStream(const c10::Stream& s) const override {
    checkIndex(s.device_index());
    flushPoint(s.device_index(), runtime::adaptive::Flush::kSynchronize);
    if (C10_UNLIKELY(runtime::orderTracking())) runtime::completeStream(ref(s));
  }
  void synchronizeDevice(const c10::DeviceIndex index) const override {
    if (index >= 0) checkIndex(index);
    if (index >= 0) flushPoint(index, runtime::adaptive::Flush::kSynchronize);
    else flushAllPoint(runtime::adaptive::Flush::kSynchronize);
    if (C10_UNLIKELY(runtime::orderTracking())) runtime::completeDevice(index);
  }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

}  // namespace

int currentDeviceIndex() { return runtime::currentDevice(); }
int64_t currentStreamId(int device) { return t_current_stream[device]; }

bool multiStreamMode() { return multiStream(); }

}  // namespace neuron_sim
