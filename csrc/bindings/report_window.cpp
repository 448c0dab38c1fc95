// The migration report's window (torch_neuron_sim.report), one call into C++
// at each end. At start: the counters (peaks reset), the allocator's trace
// switched on when the program records none, the device timeline's recorder,
// then the report marked active. At stop the reverse: the report inactive,
// the counters, the timeline summed up, HBM over time taken from the trace,
// and the settings the report shows; all of it kept here (report_pending.h)
// until the report's data is read. A report around large ops meets the host's
// caches cold at both ends (the ops streamed megabytes through them), where
// each call from Python costs its misses: one call per end keeps it cheap.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "aten/execution/compile_cache.h"
#include "aten/execution/dtype_policy.h"
#include "aten/execution/fallback_policy.h"
#include "bindings/bindings.h"
#include "bindings/report_pending.h"
#include "runtime/adaptive_eager.h"
#include "runtime/device_timeline.h"

namespace neuron_sim::bindings {
namespace {

// max_entries as torch_neuron_sim.memory._record_memory_history caps it (sys.maxsize).
constexpr size_t kAllEntries = static_cast<size_t>(std::numeric_limits<Py_ssize_t>::max());

// What the report does with HBM over time at stop (report.py decides: it
// knows whether the program records the allocator's trace itself).
enum class Hbm : int { kNone = 0, kTaken = 1, kSince = 2 };

struct ReportWindow {
  Counters before, now;
  double t0_us = 0;  // µs since the Unix epoch (the trace's clock) when the window opened
  uint64_t first_event = 0;
  PendingSummary timeline;
  std::optional<PendingUsage> usage;
  // Settings the report shows, as they were at its stop.
  bool adaptive_eager = false;
  double compile_latency_ms = 0;
  bool exact_dtypes = false;
};

std::unique_ptr<ReportWindow> start(bool record_sizes) {
  auto w = std::make_unique<ReportWindow>();
  w->before.c = reportCounters(/*reset_peaks=*/true);  // a report's peaks are its own
  w->t0_us = std::chrono::duration<double, std::micro>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (record_sizes) history::recordHistory("all", std::nullopt, kAllEntries, /*clear=*/false);
  runtime::addRecorder();
  w->first_event = runtime::eventCount();
  setReportActive(true);
  return w;
}

void stop(ReportWindow& w, int hbm, bool record_sizes_off, size_t keep_events, size_t memory_points) {
  setReportActive(false);
  w.now.c = reportCounters(/*reset_peaks=*/false);
  {
    struct Remove {
      ~Remove() { runtime::removeRecorder(); }
    } remove;
    w.timeline = PendingSummary{runtime::summarize(w.first_event, runtime::eventCount(), keep_events),
                                runtime::costModel()};
  }
  w.adaptive_eager = runtime::adaptive::enabled();
  const history::UsageBase base{{w.before.c.allocated.begin(), w.before.c.allocated.end()},
                                {w.before.c.reserved.begin(), w.before.c.reserved.end()}};
  if (hbm == static_cast<int>(Hbm::kTaken))  // a trace only the report reads: taken whole, made into series when read
    w.usage = PendingUsage{{}, history::takeTraces(), w.t0_us, base, memory_points, false};
  else if (hbm == static_cast<int>(Hbm::kSince))  // the program's own trace: summed up now, left to the program
    w.usage = PendingUsage{history::usageSince(w.t0_us, base, memory_points)};
  if (record_sizes_off) history::recordHistory(std::nullopt, std::nullopt, kAllEntries, /*clear=*/true);
  w.compile_latency_ms = compileLatencyMs();
  w.exact_dtypes = dtypePolicy() == DtypePolicy::kExact;
}

}  // namespace

void registerReportWindow(py::module_& m) {
  using rv = py::return_value_policy;
  // The report's counters, read at its start and its stop and
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
  py::class_<ReportWindow>(m, "_ReportWindow")
      .def("stop", &stop, py::arg("hbm"), py::arg("record_sizes_off"), py::arg("keep_events"),
           py::arg("memory_points"))
      .def_property_readonly("before", [](const ReportWindow& w) { return &w.before; }, rv::reference_internal)
      .def_property_readonly("now", [](const ReportWindow& w) { return &w.now; }, rv::reference_internal)
      .def_property_readonly("timeline", [](const ReportWindow& w) { return &w.timeline; }, rv::reference_internal)
      .def_property_readonly("usage", [](ReportWindow& w) { return w.usage ? &*w.usage : nullptr; },
                             rv::reference_internal)
      .def_property_readonly("adaptive_eager", [](const ReportWindow& w) { return w.adaptive_eager; })
      .def_property_readonly("compile_latency_ms", [](const ReportWindow& w) { return w.compile_latency_ms; })
      .def_property_readonly("dtype_policy",
                             [](const ReportWindow& w) { return w.exact_dtypes ? "exact" : "trainium"; });
  m.def("_report_start", &start, py::arg("record_sizes"));
}

}  // namespace neuron_sim::bindings
