// torch_neuron_sim._C's device functions: the simulated machine, the current
// device, lazy initialization and fork state, streams, and the stream-order
// checker's books (torch_neuron_sim.device, .streams, .stream_check).
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <c10/core/impl/VirtualGuardImpl.h>

#include <stdexcept>

#include "aten/device/autograd_exit.h"
#include "aten/device/guard.h"
#include "aten/neuron.h"
#include "bindings/bindings.h"
#include "runtime/default_device.h"
#include "runtime/device.h"
#include "runtime/stream_order.h"

namespace neuron_sim::bindings {
namespace {

py::dict machineDict(const runtime::DeviceTable& t) {
  py::dict d = asDict(t, NEURON_FIELD(runtime::DeviceTable, lnc), NEURON_FIELD(runtime::DeviceTable, chips),
                      NEURON_FIELD(runtime::DeviceTable, hbm_per_device));
  d["profile"] = t.profile.name;
  d["logical_cores_total"] = t.logicalCoresTotal();
  d["visible_cores"] = t.visible;
  return d;
}

}  // namespace

void registerDeviceBindings(py::module_& m) {
  m.def("_device_count", [] { return runtime::deviceCount(); });
  m.def("_current_device", [] { return runtime::currentDevice(); });
  m.def("_set_device", &runtime::setCurrentDevice);  // this thread's device
  m.def("_set_default_device", &runtime::setDefaultDevice);  // and the process default (set_device)
  m.def("_is_initialized", [] { return runtime::isInitialized(); });
  m.def("_lazy_init", [] {
    runtime::checkNotForked();
    runtime::markInitialized();
  });
  m.def("_in_bad_fork", [] { return runtime::inBadFork(); });
  // At exit: no autograd device thread may still hold a backward (autograd_exit.cpp).
  m.def("_drain_autograd_device_threads", &drainAutogradDeviceThreads, py::arg("timeout_ms"),
        py::call_guard<py::gil_scoped_release>());
  m.def("_machine", [] { return machineDict(runtime::deviceTable()); });
  // The table the current environment would give a new process (the live
  // one is fixed at first use): lets tests check many profiles in one process.
  // A bad environment value is the caller's ValueError.
  m.def("_read_machine_from_env", [] {
    try {
      return machineDict(runtime::readDeviceTable());
    } catch (const std::runtime_error& e) {
      throw py::value_error(e.what());
    }
  });

  // Streams: the calling thread's current stream on a device, asked of the
  // neuron guard itself (torch.accelerator answers for whichever accelerator
  // is current, which need not be neuron).
  m.def("_current_stream_id", [](int i) {
    return c10::impl::VirtualGuardImpl(kNeuron).getStream(neuronDevice(i)).id();
  });
  m.def("_set_current_stream", [](int i, int64_t id) {
    c10::impl::VirtualGuardImpl(kNeuron).exchangeStream(c10::Stream(c10::Stream::UNSAFE, neuronDevice(i), id));
  });
  // Milliseconds between two recorded events, by their event_id (the backend's event):
  // torch.neuron.Event.elapsed_time with another torch.neuron.Event, which PyTorch's C++
  // method refuses as `other` (it takes torch.Event itself only). The guard's checks apply.
  m.def("_event_elapsed_time", [](uintptr_t start, uintptr_t end) {
    return c10::impl::VirtualGuardImpl(kNeuron).elapsedTime(reinterpret_cast<void*>(start),
                                                            reinterpret_cast<void*>(end), -1);
  });
  m.def("_synchronize_device", [](int i) { c10::impl::VirtualGuardImpl(kNeuron).synchronizeDevice(i); });
  // The stream-order checker's happens-before books (runtime/stream_order.h).
  m.def("_order_tracking", [](bool on) {
    runtime::resetOrderTracking();
    runtime::setOrderTracking(on);
  });
  m.def("_order_tick", [](int device, int64_t stream) { return runtime::tickStream({device, stream}); });
  m.def("_order_before", [](int da, int64_t sa, uint64_t n, int db, int64_t sb) {
    return runtime::orderedBefore({da, sa}, n, {db, sb});
  });
}

}  // namespace neuron_sim::bindings
