// torch_neuron_sim._C's functions about the native set (torch_neuron_sim.native_ops):
// which ops run on the device, their kernels, the device checks they run, and the
// native ops whose CPU kernel kept the CPU's dtype error; the tracking rules,
// which native_ops loads with the table.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <torch/csrc/utils/pybind.h>

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "aten/execution/dtype_widening.h"
#include "aten/execution/execution.h"
#include "aten/execution/op_table.h"

#include "bindings/bindings.h"

namespace neuron_sim::bindings {

void registerNativeSetBindings(py::module_& m) {
  m.def("_set_native_ops", &setNativeOps);
  m.def("_native_ops", &nativeOps);
  m.def("_register_native_kernels", &registerNativeKernels);
  m.def("_register_autograd_passthrough", &registerAutogradPassthrough);
  m.def("_remove_native_kernels", &removeNativeKernels);
  m.def("_host_kernel_names", &hostKernelNames);
  // A device check that refuses every call of one op overload with a
  // ValueError carrying `message` (None puts back the op's own check, if it
  // has one): for tests that see where device checks run (op_table.h,
  // registerPrecondition).
  m.def("_set_refusing_check", [](const std::string& name, std::optional<std::string> message) {
    static std::mutex mu;
    static auto* messages = new std::unordered_map<std::string, std::string>();
    static auto* own = new std::unordered_map<std::string, Precondition>();  // the checks set aside
    if (!message) {
      Precondition restore = nullptr;
      {
        std::lock_guard<std::mutex> g(mu);
        if (!messages->erase(name)) return;
        restore = own->at(name);
        own->erase(name);
      }
      registerPrecondition(name, restore);
      return;
    }
    {
      std::lock_guard<std::mutex> g(mu);
      (*messages)[name] = *message;
    }
    Precondition refuse = [](const c10::OperatorHandle& op, const torch::jit::Stack&) {
      const std::string& name = opEntry(op).name;  // the one spelling of an op's name (op_table.cpp)
      std::string text;
      {
        std::lock_guard<std::mutex> g(mu);
        text = messages->at(name);
      }
      TORCH_CHECK_VALUE(false, text);
    };
    Precondition previous = registerPrecondition(name, refuse);
    std::lock_guard<std::mutex> g(mu);
    own->emplace(name, previous);  // a second refusing check keeps the op's own one set aside
  });
  // Native ops whose CPU kernel lacked a device dtype and kept the CPU's error:
  // (name, [ScalarType names]) (dtype_widening.h).
  m.def("_cpu_error_dtypes", [] {
    py::list out;
    for (const auto& [name, bits] : cpuErrorDtypes()) {
      py::list names;
      for (int i = 0; i < 64; ++i)
        if (bits >> i & 1) names.append(c10::toString(static_cast<at::ScalarType>(i)));
      out.append(py::make_tuple(name, names));
    }
    return out;
  });
  // tracking.rules, read with the native set (torch_neuron_sim.native_ops loads both)
  m.def("_set_tracking_rules", [](std::unordered_map<std::string, std::string> record,
                                  std::vector<std::string> never, std::vector<std::string> exempt,
                                  std::unordered_map<std::string, std::string> inputs) {
    TrackingRules r;
    r.record = std::move(record);
    r.never = {never.begin(), never.end()};
    r.exempt = {exempt.begin(), exempt.end()};
    r.inputs = std::move(inputs);
    setTrackingRules(std::move(r));
  });
}

}  // namespace neuron_sim::bindings
