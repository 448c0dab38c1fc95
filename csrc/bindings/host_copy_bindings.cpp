// torch_neuron_sim._C's functions about the host's access to device bytes: a
// neuron tensor's arena bytes as a CPU tensor (NKI kernels), the host<->device
// copy counts, and one copy run directly (torch_neuronx's _nrt_copy_*).
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include "aten/execution/tensor_alias.h"
#include "aten/kernels/copy.h"

#include "bindings/bindings.h"

namespace neuron_sim::bindings {

void registerHostCopyBindings(py::module_& m) {
  // A neuron tensor's arena bytes as a CPU tensor, without a copy (NKI kernels read and write through it).
  m.def("_host_alias", [](const at::Tensor& t) {
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "_host_alias takes a neuron tensor, got one on ",
                t.device());
    return hostAlias(t);
  });
  m.def("_host_device_copies", &hostDeviceCopies);
  // One host<->device copy, run directly (what torch_neuronx's _nrt_copy_* entry points do).
  m.def("_nrt_copy", [](const at::Tensor& src, at::Tensor& dst) { dst.copy_(src); });
}

}  // namespace neuron_sim::bindings
