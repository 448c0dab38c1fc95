// What the migration report reads at its start and stop and keeps in C++
// until its data is first read: the counters (report_measures.h), the device
// timeline summed up with the cost model of its events, and HBM over time.
// Shared by the files that give each its Python type (report_window.cpp for
// the counters, profiler_bindings.cpp, memory_bindings.cpp) and by
// report_window.cpp, which takes all of them in one call at each end of a report.
#pragma once
#include <memory>
#include <vector>

#include "aten/execution/report_measures.h"
#include "aten/memory/memory_history.h"
#include "aten/memory/usage_series.h"
#include "runtime/cost_model.h"
#include "runtime/timeline_summary.h"

namespace neuron_sim::bindings {

// Hidden as pybind11's own types are: a type it wraps must not be more visible.
#pragma GCC visibility push(hidden)

struct Counters {  // the report's counters, opaque to Python (a type of this module's own)
  ReportCounters c;
};

// The longest events of a summary kept in C++ until read (the migration
// report draws them only when its data is read): a run that never reads its
// report never builds thousands of dicts.
struct PendingSummary {
  runtime::TimelineSummary summary;
  std::shared_ptr<const runtime::CostModel> model;
};

// HBM series for the migration report: made already (series), or to be made
// from the traces taken out of the history when dicts() is first called.
struct PendingUsage {
  std::vector<history::UsageSeries> series;
  std::vector<history::Trace> traces;
  double since_us = 0;
  history::UsageBase base;
  size_t limit = 0;
  bool made = true;

  const std::vector<history::UsageSeries>& get() {
    if (!made) {
      series = history::usageOf(traces, since_us, base, limit);
      traces.clear();
      made = true;
    }
    return series;
  }
};

#pragma GCC visibility pop

}  // namespace neuron_sim::bindings
