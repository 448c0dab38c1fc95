// torch_neuron_sim._C's 64-bit rule (torch_neuron_sim.execution.dtype_policy): the
// policy, the rule's table of wide dtypes and the dtypes they compute in, and the
// host casts it caused.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <torch/csrc/utils/pybind.h>

#include <string>
#include <utility>
#include <vector>

#include "aten/execution/dtype_policy.h"
#include "aten/kernels/copy.h"
#include "bindings/bindings.h"

namespace neuron_sim::bindings {

void registerDtypeBindings(py::module_& m) {
  // The 64-bit rule
  m.def("_set_dtype_policy", [](const std::string& p) {
    if (p == "exact") setDtypePolicy(DtypePolicy::kExact);
    else if (p == "trainium") setDtypePolicy(DtypePolicy::kTrainium);
    else throw py::value_error("dtype policy must be 'trainium' or 'exact', got '" + p + "'");
  });
  m.def("_dtype_policy", [] { return dtypePolicy() == DtypePolicy::kExact ? "exact" : "trainium"; });
  m.def("_wide_int_dtypes", [] { return std::vector<at::ScalarType>(std::begin(kWideIntDtypes), std::end(kWideIntDtypes)); });
  m.def("_narrowed_dtypes", [] {  // {wide dtype: the 32-bit dtype the device computes it in}
    std::vector<std::pair<at::ScalarType, at::ScalarType>> out;
    for (int i = 0; i < static_cast<int>(at::ScalarType::NumOptions); ++i) {
      const auto s = static_cast<at::ScalarType>(i);
      if (isWide(s)) out.emplace_back(s, narrowedDtype(s));
    }
    return out;
  });
  m.def("_host_casts64", &hostCasts64);
}

}  // namespace neuron_sim::bindings
