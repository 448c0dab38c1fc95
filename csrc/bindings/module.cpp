// torch_neuron_sim._C: what the Python layer needs from C++, one
// registration per concept (bindings.h). Loading the library also registers
// the device with PyTorch (the ATen layer's static registrations); this
// function only installs the allocator wrapper and the Python callbacks.
// Nothing here is on the per-op path: these are queries and settings.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "aten/memory/allocator.h"
#include "bindings/bindings.h"

namespace neuron_sim::bindings {
// Not a concept of the device: a measuring aid for benchmarks/bench_ops.py
// (handoff_probe.cpp), so it is declared here, where it is registered.
void registerHandoffProbe(py::module_& m);
}  // namespace neuron_sim::bindings

PYBIND11_MODULE(_C, m) {
  using namespace neuron_sim;
  m.doc() = "torch_neuron_sim C++ core: the simulated Trainium device behind PyTorch's PrivateUse1 key";
  installHostAllocatorWrapper();
  bindings::registerEnvironmentBindings(m);
  bindings::registerPythonCallbacks(m);
  bindings::registerDeviceBindings(m);
  bindings::registerMemoryBindings(m);
  bindings::registerRandomBindings(m);
  bindings::registerNativeSetBindings(m);
  bindings::registerOpTrackingBindings(m);
  bindings::registerFallbackPolicyBindings(m);
  bindings::registerHostCopyBindings(m);
  bindings::registerDtypeBindings(m);
  bindings::registerNumericsBindings(m);
  bindings::registerCompileBindings(m);
  bindings::registerAdaptiveEagerBindings(m);
  bindings::registerProfilerBindings(m);
  bindings::registerReportWindow(m);  // after the types it hands out (summary, HBM series)
  bindings::registerDistributedBindings(m);  // the c10d backend (csrc/distributed)
  bindings::registerHandoffProbe(m);
}
