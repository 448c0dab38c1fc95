// torch_neuron_sim._C's distributed entry points. The ProcessGroupNeuron class
// is bound on demand: its base, c10d::Backend, is only known to pybind11 once
// torch.distributed has initialised c10d, which `import torch` alone does not do.
#include "bindings.h"

#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "collective_stats.h"
#include "process_group_neuron.h"

namespace py = pybind11;

namespace neuron_sim::distributed {
namespace {

py::object* g_reporter = nullptr;  // leaked on purpose: may be called until interpreter exit

void reportThroughPython(const std::string& name, uint64_t bytes) {
  if (!Py_IsInitialized() || !g_reporter) return;
  py::gil_scoped_acquire gil;
  try {
    (*g_reporter)(name, bytes);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("torch_neuron_sim collective report");
  }
}

}  // namespace

void registerDistributedBindings(py::module_& m) {
  py::module_ module = m;
  m.def("_bind_process_group_neuron", [module]() mutable {
    if (py::hasattr(module, "ProcessGroupNeuron")) return;
    py::module_::import("torch.distributed");  // registers c10d::Backend with pybind11
    py::class_<ProcessGroupNeuron, c10d::Backend, c10::intrusive_ptr<ProcessGroupNeuron>>(
        module, "ProcessGroupNeuron",
        "The c10d backend of the neuron device: every collective runs on the given gloo backend over "
        "host views of the device tensors.")
        .def(py::init<c10::intrusive_ptr<c10d::Backend>, int, int, std::chrono::milliseconds>(), py::arg("gloo"),
             py::arg("rank"), py::arg("size"), py::arg("timeout"));
  });
  m.def("_collective_counts", [] {
    py::list out;
    for (const auto& c : collectiveCounts()) out.append(py::make_tuple(c.name, c.calls, c.bytes));
    return out;
  });
  m.def("_clear_collective_counts", &clearCollectiveCounts);
  m.def("_set_collective_reporter", [](py::object fn) {
    delete g_reporter;
    g_reporter = fn.is_none() ? nullptr : new py::object(std::move(fn));
    setCollectiveReporter(g_reporter ? &reportThroughPython : nullptr);
  });
}

}  // namespace neuron_sim::distributed
