// torch_neuron_sim._C's functions about the path of an op: the native set
// (torch_neuron_sim.native_ops), op tracking and the op record (.tracking), the
// fallback policy, and the op counters the migration report reads. The 64-bit
// rule, the compile cache and adaptive eager have bindings files of their own.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <ATen/EmptyTensor.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "aten/execution/adaptive_eager.h"
#include "aten/execution/compile_cache.h"
#include "aten/execution/dtype_policy.h"
#include "aten/execution/dtype_widening.h"
#include "aten/execution/execution.h"
#include "aten/execution/fallback_policy.h"
#include "aten/execution/kernel_runs.h"
#include "aten/execution/numerics.h"
#include "aten/execution/op_table.h"
#include "aten/execution/report_measures.h"
#include "aten/execution/tensor_alias.h"
#include "aten/kernels/copy.h"
#include "aten/memory/allocator.h"
#include "bindings/bindings.h"
#include "bindings/report_pending.h"
#include "profiler/record.h"
#include "runtime/device.h"
#include "runtime/device_timeline.h"

namespace neuron_sim::bindings {

void registerExecutionBindings(py::module_& m) {
  // The native set and op tracking
  m.def("_set_native_ops", &setNativeOps);
  m.def("_native_ops", &nativeOps);
  m.def("_untracked_op_names", &untrackedOpNames);
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
  // tracking.rules, as torch_neuron_sim.native_ops reads it
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
  // (overload called, name the device records, executed, fallbacks)
  m.def("_op_counts", [] {
    py::list out;
    for (const auto& c : opCounts()) out.append(py::make_tuple(c.name, c.recorded, c.executed, c.fallbacks));
    return out;
  });
  m.def("_clear_op_tracking", &clearOpTracking);
  m.def("_record_named_run", &recordNamedKernelRun);
  // A neuron tensor's arena bytes as a CPU tensor, without a copy (NKI kernels read and write through it).
  m.def("_host_alias", [](const at::Tensor& t) {
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "_host_alias takes a neuron tensor, got one on ",
                t.device());
    return hostAlias(t);
  });
  m.def("_host_device_copies", &hostDeviceCopies);
  // One host<->device copy, run directly (what torch_neuronx's _nrt_copy_* entry points do).
  m.def("_nrt_copy", [](const at::Tensor& src, at::Tensor& dst) { dst.copy_(src); });
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
  m.def("_op_stats", [] {
    py::list out;
    for (const auto& s : opStats())
      out.append(asDict(s, NEURON_FIELD(OpStats, name), NEURON_FIELD(OpStats, native),
                        NEURON_FIELD(OpStats, executed), NEURON_FIELD(OpStats, fallbacks),
                        NEURON_FIELD(OpStats, downcasts_f64), NEURON_FIELD(OpStats, downcasts_i64),
                        NEURON_FIELD(OpStats, compilations), NEURON_FIELD(OpStats, cache_hits),
                        NEURON_FIELD(OpStats, widened), NEURON_FIELD(OpStats, time_ns),
                        NEURON_FIELD(OpStats, copy_ns), NEURON_FIELD(OpStats, copied_bytes)));
    return out;
  });

  // The fallback policy
  m.def("_set_fallback_mode", [](const std::string& mode) {
    if (mode == "error") setFallbackMode(FallbackMode::kError);
    else if (mode == "warn") setFallbackMode(FallbackMode::kWarn);
    else throw py::value_error("fallback mode must be 'warn' or 'error', got '" + mode + "'");
  });
  m.def("_fallback_mode", [] { return fallbackMode() == FallbackMode::kError ? "error" : "warn"; });
  m.def("_set_fallback_only_for_unimplemented", &setFallbackOnlyForUnimplemented);
  // The report's counters, read at its start and its stop (report_window.cpp) and
  // kept in C++ until the report is read (report_measures.h).
  py::class_<Counters>(m, "_ReportCounters")
      .def_property_readonly("unsupported", [](const Counters& c) { return c.c.unsupported; })
      .def_property_readonly("host_casts64", [](const Counters& c) { return c.c.host_casts64; })
      .def_property_readonly("host_copies", [](const Counters& c) {
        return py::make_tuple(c.c.copies.count, c.c.copies.bytes, c.c.copies.ns);
      })
      .def_property_readonly("allocated", [](const Counters& c) { return c.c.allocated; })
      .def_property_readonly("peak", [](const Counters& c) { return c.c.peak; })
      .def_property_readonly("peak_reserved", [](const Counters& c) { return c.c.peak_reserved; });
  // (name, executed, fallbacks, downcasts_f64, downcasts_i64, compilations,
  // cache_hits, time_ns, copy_ns, copied_bytes) of each op that changed.
  m.def("_report_op_deltas", [](const Counters& before, const Counters& now) {
    py::list out;
    for (const auto& d : opDeltas(before.c, now.c))
      out.append(py::make_tuple(d.name, d.executed, d.fallbacks, d.downcasts_f64, d.downcasts_i64, d.compilations,
                                d.cache_hits, d.time_ns, d.copy_ns, d.copied_bytes));
    return out;
  });
  m.def("_unsupported_hits", &unsupportedHits);
}

}  // namespace neuron_sim::bindings
