// torch_neuron_sim._C's functions about the path of an op: the native set
// (torch_neuron_sim.native_ops), op tracking (.tracking), the fallback policy,
// the 64-bit rule (.dtype_policy), the compile cache and its metrics
// (.compile_cache, .metrics), adaptive eager (.adaptive_eager), and what the
// migration report reads (.report).
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
namespace {

// A tuple of Python ints (a size or a stride of Inductor's generated code).
bool readDims(PyObject* seq, c10::SmallVector<int64_t, 6>& out) {
  if (!PyTuple_Check(seq)) return false;
  const Py_ssize_t n = PyTuple_GET_SIZE(seq);
  out.resize(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* v = PyTuple_GET_ITEM(seq, i);
    if (!PyLong_Check(v)) return false;
    out[i] = PyLong_AsLongLong(v);
  }
  return true;
}

// empty_strided_neuron(size, stride, dtype): the allocation of a buffer in a
// compiled graph's generated code (compile/inductor_device.py), on the
// launching thread's device (the launch sets it). The buffer is part of the
// graph's launch, as on the device, where a NEFF's buffers are no ops of
// their own: straight to the arena, without the dispatcher and its argument
// parsing (torch.empty_strided costs a few microseconds more, and a small
// graph allocates a buffer per op). What Inductor's empty_strided_cpu is to CPU graphs.
PyObject* emptyStridedNeuron(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  c10::SmallVector<int64_t, 6> size, stride;
  if (nargs != 3 || !readDims(args[0], size) || !readDims(args[1], stride) || !THPDtype_Check(args[2]) ||
      size.size() != stride.size())
    throw torch::TypeError("empty_strided_neuron(size, stride, dtype): size and stride are tuples of ints of one "
                           "length, dtype a torch.dtype");
  if (PyErr_Occurred()) return nullptr;  // an int too large for int64
  return THPVariable_Wrap(at::detail::empty_strided_generic(
      size, stride, deviceAllocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      reinterpret_cast<THPDtype*>(args[2])->scalar_type));
  END_HANDLE_TH_ERRORS
}

// Whether a launch's inputs need no handling before the graph runs: every
// tensor on neuron:device, none a 64-bit integer (compile/executors.py's
// Launch takes its general path otherwise). Per launch, per input: in Python
// the test costs a torch.device object per input.
bool inputsOnDevice(const py::list& args, int device) {
  for (const py::handle h : args) {
    if (!THPVariable_Check(h.ptr())) continue;
    const at::Tensor& t = THPVariable_Unpack(h.ptr());
    const c10::Device d = t.device();
    if (d.type() != c10::DeviceType::PrivateUse1 || d.index() != device) return false;
    if (isWideInt(t.scalar_type())) return false;
  }
  return true;
}

PyMethodDef g_empty_strided_neuron{"_empty_strided_neuron", reinterpret_cast<PyCFunction>(emptyStridedNeuron),
                                   METH_FASTCALL, "A compiled graph's buffer on the current neuron device."};

}  // namespace

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
      const auto& n = op.schema().operator_name();
      std::string text;
      {
        std::lock_guard<std::mutex> g(mu);
        text = messages->at(n.overload_name.empty() ? n.name : n.name + "." + n.overload_name);
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
  m.def("_set_report_active", &setReportActive);
  m.def("_host_copy_stats", [] {
    const HostCopyStats c = hostCopyStats();
    py::dict d;
    d["count"] = c.count;
    d["bytes"] = c.bytes;
    d["ns"] = c.ns;
    return d;
  });
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
  m.def("_note_unsupported", &noteUnsupported);
  m.def("_unsupported_hits", &unsupportedHits);
  m.def("_clear_unsupported_hits", &clearUnsupportedHits);

  // The 64-bit rule
  m.def("_set_dtype_policy", [](const std::string& p) {
    if (p == "exact") setDtypePolicy(DtypePolicy::kExact);
    else if (p == "trainium") setDtypePolicy(DtypePolicy::kTrainium);
    else throw py::value_error("dtype policy must be 'trainium' or 'exact', got '" + p + "'");
  });
  m.def("_dtype_policy", [] { return dtypePolicy() == DtypePolicy::kExact ? "exact" : "trainium"; });
  m.def("_wide_int_dtypes", [] { return std::vector<at::ScalarType>(std::begin(kWideIntDtypes), std::end(kWideIntDtypes)); });
  // The device's numerics (docs/numerics.md).
  m.def("_numerics", [] {
    const runtime::numerics::Settings s = numericsSettings();
    py::dict d;
    d["stochastic_rounding"] = s.stochastic;
    d["stochastic_rounding_seed"] = s.seed;
    d["auto_cast"] = std::string(s.auto_cast);
    d["auto_cast_type"] = std::string(runtime::numerics::formatName(s.auto_cast_type));
    d["cc_flags"] = s.cc_flags;
    return d;
  });
  m.def("_numerics_reread", &runtime::numerics::reset);
  m.def("_rounding_hits", &roundingHits);
  m.def("_clear_rounding_hits", &clearRoundingHits);
  m.def("_host_casts64", &hostCasts64);
  m.def("_clear_host_casts64", &clearHostCasts64);

  // The compile cache and its metrics
  m.def("_clear_compile_cache", &clearCompileCache);
  m.def("_set_compile_latency_ms", &setCompileLatencyMs);
  m.def("_compile_latency_ms", &compileLatencyMs);
  // One launch of a compiled graph, in one call from Python: the launching
  // thread's device (a guard: the process default stays), the in-graph flag
  // (its ops are a compiled unit's, not eager compilations), the graph itself
  // (a Python callable), and its device event while the profiler records.
  m.def("_launch_graph", [](const py::function& fn, const py::list& args, int device, bool unit,
                            int64_t work) -> py::object {
    const int64_t issued = work >= 0 && profiler::recording() ? runtime::wallNowNs() : 0;
    const int prev = runtime::currentDevice();
    if (prev != device) runtime::setCurrentDevice(device);
    setInGraphLaunch(unit);
    struct Restore {
      int prev, device;
      ~Restore() {
        setInGraphLaunch(false);
        if (prev != device) runtime::setCurrentDevice(prev);
      }
    } restore{prev, device};
    py::object outs = fn(args);
    if (issued) profiler::recordGraphRun(static_cast<uint64_t>(work), device, issued);
    return outs;
  });
  m.def("_launch_inputs_on_device", &inputsOnDevice);
  // Not through pybind: its argument conversion costs what this call saves.
  m.add_object("_empty_strided_neuron",
               py::reinterpret_steal<py::object>(PyCFunction_New(&g_empty_strided_neuron, nullptr)));
  m.def("_set_metrics_enabled", &setMetricsEnabled);
  m.def("_metrics_enabled", &metricsEnabled);
  m.def("_compile_metrics", [] {
    return asDict(compileMetrics(), NEURON_FIELD(CompileMetrics, total_compilations),
                  NEURON_FIELD(CompileMetrics, in_memory_hits), NEURON_FIELD(CompileMetrics, in_memory_misses),
                  NEURON_FIELD(CompileMetrics, time_samples), NEURON_FIELD(CompileMetrics, time_total_ns),
                  NEURON_FIELD(CompileMetrics, time_min_ns), NEURON_FIELD(CompileMetrics, time_max_ns));
  });
  m.def("_clear_compile_metrics", &clearCompileMetrics);

  // Adaptive eager (TORCH_NEURONX_ENABLE_CONCATENATION)
  m.def("_set_adaptive_eager", &setAdaptiveEager);
  m.def("_adaptive_eager_enabled", &runtime::adaptive::enabled);
  m.def("_set_adaptive_eager_max_ops", [](int64_t n) {
    if (n < 1) throw py::value_error("adaptive eager: a fused launch holds at least 1 op, got " + std::to_string(n));
    runtime::adaptive::setMaxOps(static_cast<uint32_t>(std::min<int64_t>(n, UINT32_MAX)));
  });
  m.def("_adaptive_eager_max_ops", &runtime::adaptive::maxOps);
  m.def("_adaptive_eager_flush", [](bool kernel_call) {
    flushAllPoint(kernel_call ? runtime::adaptive::Flush::kKernelCall : runtime::adaptive::Flush::kExplicit);
  });
  m.def("_adaptive_eager_stats", [] {
    const runtime::adaptive::Stats s = runtime::adaptive::stats();
    py::dict flushes;
    for (int i = 0; i < runtime::adaptive::kFlushReasons; ++i)
      flushes[runtime::adaptive::flushName(static_cast<runtime::adaptive::Flush>(i))] = s.flushes[i];
    py::dict d;
    d["ops"] = s.ops;
    d["launches"] = s.launches;
    d["fused_launches"] = s.fused_launches;
    d["fused_ops"] = s.fused_ops;
    d["compilations"] = s.compilations;
    d["cache_hits"] = s.cache_hits;
    d["flushes"] = flushes;
    return d;
  });
  m.def("_clear_adaptive_eager_stats", &runtime::adaptive::clearStats);
}

}  // namespace neuron_sim::bindings
