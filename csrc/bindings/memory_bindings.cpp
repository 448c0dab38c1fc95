// torch_neuron_sim._C's memory functions (torch_neuron_sim.memory,
// .fault_injection): statistics, history and snapshots, guard checks,
// injected failures, the per-process limit, the debug modes, and deliberate
// host access under NEURON_SIM_PROTECT. Queries and settings only; nothing
// here is on the allocation path.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <memory>
#include <unordered_map>

#include "aten/memory/allocator.h"
#include "aten/memory/memory_history.h"
#include "aten/neuron.h"
#include "aten/memory/usage_series.h"
#include "bindings/bindings.h"
#include "bindings/report_pending.h"
#include "runtime/debug_modes.h"
#include "runtime/device.h"
#include "runtime/fault_injection.h"
#include "runtime/host_access.h"

namespace neuron_sim::bindings {
namespace {

py::dict statDict(const runtime::Stat& s) {
  return asDict(s, NEURON_FIELD(runtime::Stat, current), NEURON_FIELD(runtime::Stat, peak),
                NEURON_FIELD(runtime::Stat, allocated), NEURON_FIELD(runtime::Stat, freed));
}

py::dict poolDict(const runtime::PoolStat& p) {
  py::dict d;
  d["all"] = statDict(p.all);
  d["small_pool"] = statDict(p.small);
  d["large_pool"] = statDict(p.large);
  return d;
}

// torch.cuda.memory_stats_as_nested_dict()'s structure.
py::dict memoryStats(const runtime::AllocatorStats& s) {
  using S = runtime::AllocatorStats;
  py::dict d = asDict(s, NEURON_FIELD(S, num_alloc_retries), NEURON_FIELD(S, num_ooms),
                      NEURON_FIELD(S, num_tensor_frees), NEURON_FIELD(S, allocation_requests),
                      NEURON_FIELD(S, num_device_alloc), NEURON_FIELD(S, num_device_free),
                      NEURON_FIELD(S, largest_free_block));
  d["allocated_bytes"] = poolDict(s.allocated_bytes);
  d["reserved_bytes"] = poolDict(s.reserved_bytes);
  d["active_bytes"] = poolDict(s.active_bytes);
  d["requested_bytes"] = poolDict(s.active_bytes);  // torch.cuda's name for what tensors asked for
  d["inactive_split_bytes"] = poolDict(s.inactive_split_bytes);
  d["allocation"] = poolDict(s.allocation);
  d["segment"] = poolDict(s.segment);
  d["active"] = poolDict(s.active);
  d["inactive_split"] = poolDict(s.inactive_split);
  d["num_sync_all_streams"] = 0;  // kernels finish at launch: nothing to wait for
  d["max_split_size"] = -1;       // no max_split_size_mb: every cached block may be split
  d["oversize_allocations"] = statDict(runtime::Stat{});
  d["oversize_segments"] = statDict(runtime::Stat{});
  return d;
}

// Frame lists shared by many entries become one Python list, which pickle
// then stores once.
struct FrameConverter {
  std::unordered_map<const void*, py::list> done;
  py::list operator()(const history::Stack& st) {
    if (!st) return py::list();
    auto it = done.find(st.get());
    if (it != done.end()) return it->second;
    py::list l;
    for (const history::Frame& f : *st) l.append(asDict(f, NEURON_FIELD(history::Frame, filename),
                                                       NEURON_FIELD(history::Frame, line),
                                                       NEURON_FIELD(history::Frame, name)));
    done.emplace(st.get(), l);
    return l;
  }
};

// torch.cuda.memory._snapshot()'s structure: the caching allocator's
// segments with their blocks in address order, and a trace of allocator
// actions per device.
py::dict snapshotDict(const history::Snapshot& snap) {
  FrameConverter frames;
  py::list segments;
  for (const auto& s : snap.segments) {
    py::list blocks;
    for (const auto& b : s.blocks) {
      py::dict d = asDict(b, NEURON_FIELD(history::SnapshotBlock, address), NEURON_FIELD(history::SnapshotBlock, size),
                          NEURON_FIELD(history::SnapshotBlock, requested_size));
      d["state"] = b.allocated ? "active_allocated" : "inactive";
      d["frames"] = frames(b.frames);
      blocks.append(d);
    }
    py::dict seg = asDict(s, NEURON_FIELD(history::SnapshotSegment, device),
                          NEURON_FIELD(history::SnapshotSegment, address),
                          NEURON_FIELD(history::SnapshotSegment, total_size),
                          NEURON_FIELD(history::SnapshotSegment, allocated_size),
                          NEURON_FIELD(history::SnapshotSegment, requested_size));
    seg["active_size"] = s.allocated_size;
    seg["stream"] = 0;
    seg["segment_type"] = s.small_pool ? "small" : "large";
    seg["segment_pool_id"] = py::make_tuple(0, 0);
    seg["is_expandable"] = false;
    seg["frames"] = py::list();
    seg["blocks"] = blocks;
    segments.append(seg);
  }
  py::list device_traces;
  for (const auto& entries : snap.device_traces) {
    py::list trace;
    for (const history::TraceEntry& e : entries) {
      py::dict d;
      d["action"] = history::actionName(e.action);
      if (e.action != history::Action::kOom) d["addr"] = e.addr;
      d["size"] = e.size;
      d["stream"] = 0;
      d["time_us"] = e.time_us;
      d["frames"] = frames(e.frames);
      if (e.action == history::Action::kOom) d["device_free"] = e.device_free;
      trace.append(d);
    }
    device_traces.append(trace);
  }
  py::dict out;
  out["segments"] = segments;
  out["device_traces"] = device_traces;
  py::dict settings;
  settings["PYTORCH_NO_CUDA_MEMORY_CACHING"] = false;  // freed blocks stay cached in their segments
  out["allocator_settings"] = settings;
  return out;
}

py::list usageDicts(const std::vector<history::UsageSeries>& series) {
  py::list out;
  using history::UsageSeries;
  for (const auto& u : series)
    out.append(asDict(u, NEURON_FIELD(UsageSeries, device), NEURON_FIELD(UsageSeries, events),
                      NEURON_FIELD(UsageSeries, downsampled), NEURON_FIELD(UsageSeries, seconds),
                      NEURON_FIELD(UsageSeries, bytes), NEURON_FIELD(UsageSeries, reserved)));
  return out;
}

// `with _HostAccess(): ...` holds a runtime::HostAccess on this thread.
struct HostAccessContext {
  std::unique_ptr<runtime::HostAccess> access;
};

}  // namespace

void registerMemoryBindings(py::module_& m) {
  m.def("_memory_stats", [](int i) { return memoryStats(runtime::allocator(i).stats()); });
  m.def("_capacity", [](int i) { return runtime::allocator(i).capacity(); });
  // Each segment as (offset, size, pool, blocks), each block as (offset,
  // size, requested, allocated); offsets from the arena's base.
  m.def("_segments", [](int i) {
    py::list out;
    for (const auto& s : runtime::allocator(i).segments()) {
      py::list blocks;
      for (const auto& b : s.blocks) blocks.append(py::make_tuple(b.offset, b.size, b.requested, b.allocated));
      out.append(py::make_tuple(s.offset, s.size, s.pool == runtime::kSmallPool ? "small" : "large", blocks));
    }
    return out;
  });
  // torch.cuda.caching_allocator_alloc / _delete: raw device memory.
  m.def("_raw_alloc", [](int i, size_t n) {
    c10::DataPtr p = allocateOn(i, n, neuronDevice(i));
    return reinterpret_cast<uintptr_t>(p.release_context());
  });
  m.def("_raw_free", [](uintptr_t p) { rawFree(reinterpret_cast<void*>(p)); });
  m.def("_arena_base", [](int i) { return runtime::allocator(i).base(); });
  m.def("_reset_peak", [](int i) { runtime::allocator(i).resetPeak(); });
  m.def("_reset_accumulated", [](int i) { runtime::allocator(i).resetAccumulated(); });
  m.def("_empty_cache", [](int i) {
    uint64_t released = runtime::allocator(i).emptyCache();
    if (runtime::debugModes() & runtime::kHistory) history::recordSegments(i, runtime::allocator(i));
    return released;
  });
  // The size class and pool of a request, as the allocator rounds it.
  m.def("_round_size", [](uint64_t n) {
    using runtime::CachingAllocator;
    const uint64_t r = CachingAllocator::roundSize(n);
    const runtime::Pool pool = CachingAllocator::poolOf(n);
    return py::make_tuple(r, pool == runtime::kSmallPool ? "small" : "large", CachingAllocator::segmentSize(pool, r));
  });

  m.def("_record_memory_history", &history::recordHistory, py::arg("enabled"), py::arg("context"),
        py::arg("max_entries"), py::arg("clear_history"));
  m.def("_memory_snapshot", [] { return snapshotDict(history::snapshot()); });
  // HBM over time for the migration report (report_window.cpp makes them at its stop): the
  // series stay in C++ until dicts(), which builds them when the report is read.
  py::class_<PendingUsage>(m, "_PendingUsage").def("dicts", [](PendingUsage& p) { return usageDicts(p.get()); });
  m.def("_check_guards", [] {
    py::list out;
    for (int i = 0; i < runtime::deviceCount(); ++i) {
      runtime::CachingAllocator* a = runtime::reservedAllocator(i);
      if (!a) continue;
      for (const auto& d : a->checkGuards())
        out.append(py::make_tuple(i, d.data, d.requested, d.first_damaged_byte,
                                  history::allocationSite(reinterpret_cast<const void*>(d.data))));
    }
    return out;
  });
  m.def("_arm_alloc_failure", &runtime::armAllocationFailure);
  m.def("_allocations_until_failure", &runtime::allocationsUntilFailure);
  m.def("_set_memory_limit", [](int i, uint64_t bytes) { runtime::allocator(i).setLimit(bytes); });
  m.def("_memory_limit", [](int i) { return runtime::allocator(i).limit(); });
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

}  // namespace neuron_sim::bindings
