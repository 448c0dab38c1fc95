// torch_neuron_sim._C's memory functions beyond the statistics: history and
// snapshots, guard checks, injected failures, the per-process limit, the debug
// modes, and deliberate host access under NEURON_SIM_PROTECT. Queries and
// settings only; nothing here is on the allocation path.
#include "memory_bindings.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>

#include "../runtime/debug_modes.h"
#include "../runtime/device.h"
#include "../runtime/fault_injection.h"
#include "../runtime/host_access.h"
#include "memory_history.h"

namespace py = pybind11;

namespace neuron_sim {
namespace {

// `with _HostAccess(): ...` holds a runtime::HostAccess on this thread.
struct HostAccessContext {
  std::unique_ptr<runtime::HostAccess> access;
};

}  // namespace

void registerMemoryBindings(py::module_& m) {
  m.def("_record_memory_history", &history::recordHistory, py::arg("enabled"), py::arg("context"),
        py::arg("max_entries"), py::arg("clear_history"));
  m.def("_memory_snapshot", &history::snapshot);
  m.def("_allocation_site",
        [](uintptr_t data) { return history::allocationSite(reinterpret_cast<const void*>(data)); });
  m.def("_check_guards", [] {
    py::list out;
    for (int i = 0; i < runtime::deviceCount(); ++i) {
      runtime::Arena* a = runtime::reservedArena(i);
      if (!a) continue;
      for (const auto& d : a->checkGuards())
        out.append(py::make_tuple(i, d.data, d.requested, d.first_damaged_byte,
                                  history::allocationSite(reinterpret_cast<const void*>(d.data))));
    }
    return out;
  });
  m.def("_arm_alloc_failure", &runtime::armAllocationFailure);
  m.def("_allocations_until_failure", &runtime::allocationsUntilFailure);
  m.def("_set_memory_limit", [](int i, uint64_t bytes) { runtime::arena(i).setLimit(bytes); });
  m.def("_memory_limit", [](int i) { return runtime::arena(i).limit(); });
  // Host access to arena pages under NEURON_SIM_PROTECT, for code that reads
  // device bytes on purpose (tests, inspectors).
  py::class_<HostAccessContext>(m, "_HostAccess")
      .def(py::init<>())
      .def("__enter__", [](HostAccessContext& c) { c.access = std::make_unique<runtime::HostAccess>(); })
      .def("__exit__", [](HostAccessContext& c, py::args) { c.access.reset(); });
  m.def("_debug_modes", [] {
    py::dict d;
    d["poison"] = runtime::debugMode(runtime::kPoison);
    d["guard"] = runtime::debugMode(runtime::kGuard);
    d["protect"] = runtime::debugMode(runtime::kProtect);
    return d;
  });
  m.def("_set_debug_mode", [](const std::string& name, bool on) {
    // Protection is fixed at start-up: arenas are mapped accordingly.
    if (name == "poison") runtime::setDebugMode(runtime::kPoison, on);
    else if (name == "guard") runtime::setDebugMode(runtime::kGuard, on);
    else throw py::value_error("debug mode must be 'poison' or 'guard' (NEURON_SIM_PROTECT is set at start-up)");
  });
}

}  // namespace neuron_sim
