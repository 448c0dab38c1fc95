// torch_neuron_sim._C's distributed entry points (csrc/distributed/). The
// ProcessGroupNeuron class is bound on demand: its base, c10d::Backend, is
// only known to pybind11 once torch.distributed has initialised c10d, which
// `import torch` alone does not do. The collective reporter, a call up into
// Python, is with the other callbacks (python_callbacks.cpp).
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "bindings/bindings.h"
#include "distributed/collective_stats.h"
#include "distributed/process_group_neuron.h"

namespace neuron_sim::bindings {

void registerDistributedBindings(py::module_& m) {
  using distributed::ProcessGroupNeuron;
  py::module_ module = m;
  m.def("_bind_process_group_neuron", [module]() mutable {
    if (py::hasattr(module, "ProcessGroupNeuron")) return;
    py::module_::import("torch.distributed");  // registers c10d::Backend with pybind11
    py::class_<ProcessGroupNeuron, c10d::Backend, c10::intrusive_ptr<ProcessGroupNeuron>>(
        module, "ProcessGroupNeuron",
        "The c10d backend of the neuron device: every collective runs on the given gloo backend over "
        "host views of the device tensors.")
        .def(py::init<c10::intrusive_ptr<c10d::Backend>, c10::intrusive_ptr<c10d::Store>, int, int,
                      std::chrono::milliseconds>(),
             py::arg("gloo"), py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"));
  });
  m.def("_collective_counts", [] {
    py::list out;
    for (const auto& c : distributed::collectiveCounts()) out.append(py::make_tuple(c.name, c.calls, c.bytes));
    return out;
  });
  m.def("_clear_collective_counts", &distributed::clearCollectiveCounts);
}

}  // namespace neuron_sim::bindings
