// The pieces of torch_neuron_sim._C, one file per concept, and the two
// helpers they share. Only this layer includes pybind11: below it, C++ calls
// up into Python through function pointers that python_callbacks.cpp sets.
//
// Errors: the runtime throws std::out_of_range for a bad device index and
// pybind11 turns it into IndexError (std::invalid_argument into ValueError),
// so bindings call the runtime directly; the ATen layer's own errors
// (c10::Error and its subclasses) are translated by torch.
#pragma once
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <utility>

namespace neuron_sim::bindings {

namespace py = pybind11;

void registerDeviceBindings(py::module_& m);     // devices, the machine table, streams, stream order
void registerMemoryBindings(py::module_& m);     // statistics, history, snapshots, guards, limits, debug modes
void registerRandomBindings(py::module_& m);     // each device's default generator
void registerNativeSetBindings(py::module_& m);      // the native set: ops, kernels, device checks
void registerOpTrackingBindings(py::module_& m);     // op tracking and the op record
void registerFallbackPolicyBindings(py::module_& m); // the fallback policy, unsupported features hit
void registerHostCopyBindings(py::module_& m);       // the host's access to device bytes, host<->device copies
void registerDtypeBindings(py::module_& m);      // the 64-bit rule
void registerNumericsBindings(py::module_& m);   // the device numerics (docs/numerics.md)
void registerCompileBindings(py::module_& m);    // the compile cache, its metrics, a compiled graph's launch
void registerAdaptiveEagerBindings(py::module_& m);  // adaptive eager
void registerDistributedBindings(py::module_& m);  // the c10d backend class, collective counts
void registerProfilerBindings(py::module_& m);   // the device timeline, the cost model, record_* for other layers
void registerPythonCallbacks(py::module_& m);    // the C++ -> Python path: logger, reports, reclaim, stacks
void registerReportWindow(py::module_& m);       // the migration report's counters, its start and stop, one call each
void registerEnvironmentBindings(py::module_& m);  // what a true flag is, for Python's reads of the environment

// A C++ struct as a Python dict, one key per named field:
//   asDict(stats, NEURON_FIELD(OpStats, name), NEURON_FIELD(OpStats, executed))
template <typename S, typename... T>
py::dict asDict(const S& s, std::pair<const char*, T S::*>... fields) {
  py::dict d;
  ((d[fields.first] = s.*(fields.second)), ...);
  return d;
}
#define NEURON_FIELD(Struct, member) std::pair{#member, &Struct::member}

}  // namespace neuron_sim::bindings
