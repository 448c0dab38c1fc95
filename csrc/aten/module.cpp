// torch_neuron_sim._C: what the Python layer needs from C++. Nothing here is
// on the per-op path; these are queries and settings.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <ATen/ops/empty.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <cstring>
#include <functional>
#include <mutex>

#include "../distributed/bindings.h"
#include "../runtime/device.h"
#include "../runtime/stream_order.h"
#include "compile_cache.h"
#include "dtype_policy.h"
#include "generator.h"
#include "memory_bindings.h"
#include "profiler_bindings.h"
#include "op_table.h"
#include "neuron.h"

namespace py = pybind11;

namespace neuron_sim {
void registerNativeKernels(const std::vector<std::string>& names);
}

namespace {

using namespace neuron_sim;

py::object* g_logger = nullptr;  // leaked on purpose: called until interpreter exit

void announceThroughPython(const std::string& name) {
  if (!Py_IsInitialized() || !g_logger) return;
  py::gil_scoped_acquire gil;
  try {
    (*g_logger)(name);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("torch_neuron_sim fallback logger");
  }
}

py::object* g_reporter = nullptr;  // the active migration report's fallback recorder

void reportThroughPython(const std::string& name) {
  if (!Py_IsInitialized() || !g_reporter) return;
  py::gil_scoped_acquire gil;
  try {
    (*g_reporter)(name);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("torch_neuron_sim migration report");
  }
}

// Before retrying an allocation that did not fit: collect Python reference
// cycles, which may be all that keeps some device tensors alive.
void collectGarbage() {
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
  py::gil_scoped_acquire gil;
  try {
    py::module_::import("gc").attr("collect")();
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("torch_neuron_sim OOM reclaim");
  }
}

template <typename F>
auto runtimeCall(F f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::out_of_range& e) {
    throw py::index_error(e.what());
  }
}

py::dict statDict(const runtime::Stat& s) {
  py::dict d;
  d["current"] = s.current;
  d["peak"] = s.peak;
  d["allocated"] = s.allocated;
  d["freed"] = s.freed;
  return d;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_neuron_sim C++ core: the simulated Trainium device behind PyTorch's PrivateUse1 key";
  installHostAllocatorWrapper();
  setReclaimHook(&collectGarbage);
  registerMemoryBindings(m);  // snapshots, guard checks, fault injection, limits
  distributed::registerDistributedBindings(m);  // the c10d backend (csrc/distributed)

  // Devices
  m.def("_device_count", [] { return runtime::deviceCount(); });
  m.def("_current_device", [] { return runtime::currentDevice(); });
  m.def("_set_device", [](int i) { runtimeCall([&] { runtime::setCurrentDevice(i); }); });
  m.def("_check_device", [](int i) { runtimeCall([&] { runtime::checkDevice(i); }); });
  m.def("_is_initialized", [] { return runtime::isInitialized(); });
  m.def("_lazy_init", [] {
    runtime::checkNotForked();
    runtime::markInitialized();
  });
  m.def("_in_bad_fork", [] { return runtime::inBadFork(); });
  auto machineDict = [](const runtime::DeviceTable& t) {
    py::dict d;
    d["profile"] = t.profile.name;
    d["lnc"] = t.lnc;
    d["chips"] = t.chips;
    d["hbm_per_device"] = t.hbm_per_device;
    d["logical_cores_total"] = t.logicalCoresTotal();
    d["visible_cores"] = t.visible;
    return d;
  };
  m.def("_machine", [machineDict] { return machineDict(runtime::deviceTable()); });
  // The table the current environment would give a new process (the live
  // one is fixed at first use): lets tests check many profiles in one process.
  m.def("_read_machine_from_env", [machineDict] {
    try {
      return machineDict(runtime::readDeviceTable());
    } catch (const std::runtime_error& e) {
      throw py::value_error(e.what());
    }
  });

  // Memory
  m.def("_memory_stats", [](int i) {
    auto s = runtimeCall([&] { return runtime::arena(i).stats(); });
    py::dict d;
    d["allocated_bytes"] = statDict(s.allocated_bytes);
    d["reserved_bytes"] = statDict(s.reserved_bytes);
    d["active_bytes"] = statDict(s.active_bytes);
    d["num_alloc_retries"] = s.num_alloc_retries;
    d["num_ooms"] = s.num_ooms;
    d["num_tensor_frees"] = s.num_tensor_frees;
    d["allocation_requests"] = s.allocation_requests;
    return d;
  });
  m.def("_capacity", [](int i) { return runtimeCall([&] { return runtime::arena(i).capacity(); }); });
  m.def("_arena_blocks", [](int i) {
    py::list out;
    for (const auto& b : runtimeCall([&] { return runtime::arena(i).blocks(); }))
      out.append(py::make_tuple(b.offset, b.size, b.requested, b.allocated));
    return out;
  });
  m.def("_arena_base", [](int i) { return runtimeCall([&] { return runtime::arena(i).base(); }); });
  m.def("_reset_peak", [](int i) { runtimeCall([&] { runtime::arena(i).resetPeak(); }); });
  m.def("_reset_accumulated", [](int i) { runtimeCall([&] { runtime::arena(i).resetAccumulated(); }); });
  m.def("_release_free_pages", [](int i) { runtimeCall([&] { runtime::arena(i).releaseFreePages(); }); });

  // Streams: the calling thread's current stream on a device, asked of the
  // neuron guard itself (torch.accelerator answers for whichever accelerator
  // is current, which need not be neuron).
  m.def("_current_stream_id", [](int i) {
    return c10::impl::VirtualGuardImpl(kNeuron).getStream(neuronDevice(i)).id();
  });
  m.def("_set_current_stream", [](int i, int64_t id) {
    c10::impl::VirtualGuardImpl(kNeuron).exchangeStream(c10::Stream(c10::Stream::UNSAFE, neuronDevice(i), id));
  });
  m.def("_synchronize_device", [](int i) { c10::impl::VirtualGuardImpl(kNeuron).synchronizeDevice(i); });
  // The stream-order checker's happens-before books (runtime/stream_order.h).
  m.def("_order_tracking", [](bool on) {
    runtime::resetOrderTracking();
    runtime::setOrderTracking(on);
  });
  registerProfilerBindings(m);
  m.def("_order_tick", [](int device, int64_t stream) { return runtime::tickStream({device, stream}); });
  m.def("_order_before", [](int da, int64_t sa, uint64_t n, int db, int64_t sb) {
    return runtime::orderedBefore({da, sa}, n, {db, sb});
  });

  // Random number generation: the default generator of each device
  m.def("_rng_manual_seed", [](int i, uint64_t seed) {
    at::Generator g = defaultGenerator(i);
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_current_seed(seed);
  });
  m.def("_rng_seed", [](int i) {
    at::Generator g = defaultGenerator(i);
    std::lock_guard<std::mutex> lock(g.mutex());
    return g.seed();
  });
  m.def("_rng_initial_seed", [](int i) { return defaultGenerator(i).current_seed(); });
  m.def("_rng_get_state", [](int i) {
    at::Generator g = defaultGenerator(i);
    std::lock_guard<std::mutex> lock(g.mutex());
    at::Tensor t = g.get_state();
    return py::bytes(static_cast<const char*>(t.const_data_ptr()), t.numel());
  });
  m.def("_rng_set_state", [](int i, const std::string& bytes) {
    at::Generator g = defaultGenerator(i);
    std::lock_guard<std::mutex> lock(g.mutex());
    at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::TensorOptions().dtype(at::kByte));
    std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
    g.set_state(t);
  });

  // Op tracking and the native set
  m.def("_set_native_ops", &setNativeOps);
  m.def("_native_ops", &nativeOps);
  m.def("_untracked_op_names", &untrackedOpNames);
  m.def("_register_native_kernels", &registerNativeKernels);
  m.def("_op_counts", [] {
    py::list out;
    for (const auto& c : opCounts()) out.append(py::make_tuple(c.name, c.executed, c.fallbacks));
    return out;
  });
  m.def("_clear_op_tracking", &clearOpTracking);
  m.def("_set_fallback_mode", [](const std::string& mode) {
    if (mode == "error") setFallbackMode(FallbackMode::kError);
    else if (mode == "warn") setFallbackMode(FallbackMode::kWarn);
    else throw py::value_error("fallback mode must be 'warn' or 'error', got '" + mode + "'");
  });
  m.def("_fallback_mode", [] { return fallbackMode() == FallbackMode::kError ? "error" : "warn"; });
  m.def("_set_fallback_logger", [](py::object fn) {
    if (!g_logger) g_logger = new py::object();
    *g_logger = std::move(fn);
    setFallbackAnnouncer(&announceThroughPython);
  });

  // Trainium semantics and the migration report (dtype_policy, compile_cache, op_table)
  m.def("_set_dtype_policy", [](const std::string& p) {
    if (p == "exact") setDtypePolicy(DtypePolicy::kExact);
    else if (p == "trainium") setDtypePolicy(DtypePolicy::kTrainium);
    else throw py::value_error("dtype policy must be 'trainium' or 'exact', got '" + p + "'");
  });
  m.def("_dtype_policy", [] { return dtypePolicy() == DtypePolicy::kExact ? "exact" : "trainium"; });
  m.def("_op_stats", [] {
    py::list out;
    for (const auto& s : opStats()) {
      py::dict d;
      d["name"] = s.name;
      d["native"] = s.native;
      d["executed"] = s.executed;
      d["fallbacks"] = s.fallbacks;
      d["downcasts_f64"] = s.downcasts_f64;
      d["downcasts_i64"] = s.downcasts_i64;
      d["compilations"] = s.compilations;
      d["cache_hits"] = s.cache_hits;
      out.append(d);
    }
    return out;
  });
  m.def("_clear_compile_cache", &clearCompileCache);
  m.def("_set_compile_latency_ms", &setCompileLatencyMs);
  m.def("_compile_latency_ms", &compileLatencyMs);
  m.def("_set_in_graph_launch", &setInGraphLaunch);
  m.def("_set_metrics_enabled", &setMetricsEnabled);
  m.def("_metrics_enabled", &metricsEnabled);
  m.def("_compile_metrics", [] {
    CompileMetrics c = compileMetrics();
    py::dict d;
    d["total_compilations"] = c.total_compilations;
    d["in_memory_hits"] = c.in_memory_hits;
    d["in_memory_misses"] = c.in_memory_misses;
    d["time_samples"] = c.time_samples;
    d["time_total_ns"] = c.time_total_ns;
    d["time_min_ns"] = c.time_min_ns;
    d["time_max_ns"] = c.time_max_ns;
    return d;
  });
  m.def("_clear_compile_metrics", &clearCompileMetrics);
  m.def("_note_unsupported", &noteUnsupported);
  m.def("_unsupported_hits", &unsupportedHits);
  m.def("_clear_unsupported_hits", &clearUnsupportedHits);
  m.def("_host_casts64", &hostCasts64);
  m.def("_clear_host_casts64", &clearHostCasts64);
  m.def("_set_fallback_reporter", [](py::object fn) {
    if (!g_reporter) g_reporter = new py::object();
    *g_reporter = std::move(fn);
    setFallbackReporter(&reportThroughPython);
  });
  m.def("_set_report_active", &setReportActive);
  m.def("_set_fallback_only_for_unimplemented", &setFallbackOnlyForUnimplemented);
}
