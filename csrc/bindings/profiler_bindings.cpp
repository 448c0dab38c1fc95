// The profiler's Python surface (torch_neuron_sim.profiler): the device
// timeline as plain data, the cost model's settings and closed forms, and the
// record_* functions other layers call. Nothing here is on the per-op path.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "bindings/bindings.h"
#include "bindings/report_pending.h"
#include "profiler/record.h"
#include "profiler/timeline_api.h"
#include "runtime/correlation.h"
#include "runtime/cost_model.h"
#include "runtime/device_timeline.h"
#include "runtime/engine_cost.h"
#include "runtime/timeline_summary.h"

#include <array>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>

namespace neuron_sim::bindings {
namespace {

using runtime::CostConstants;
using runtime::CostModel;
using runtime::MathClass;
using runtime::TensorShape;

MathClass mathOf(const std::string& dtype) {
  if (dtype == "bfloat16" || dtype == "float16" || dtype == "half") return MathClass::kBf16;
  if (dtype.rfind("float8", 0) == 0) return MathClass::kFp8;
  return MathClass::kFp32;
}

int elemBytesOf(const std::string& dtype) {
  if (dtype.rfind("float8", 0) == 0 || dtype == "int8" || dtype == "uint8" || dtype == "bool") return 1;
  if (dtype == "bfloat16" || dtype == "float16" || dtype == "half" || dtype == "int16") return 2;
  return 4;  // 64-bit types are stored in 32 bits on the device
}

// [(sizes, dtype name), ...] as the Python side describes tensors.
std::vector<TensorShape> shapesOf(const std::vector<std::pair<std::vector<int64_t>, std::string>>& ts) {
  std::vector<TensorShape> out;
  for (const auto& [sizes, dtype] : ts) out.push_back(TensorShape::of(sizes, elemBytesOf(dtype), mathOf(dtype)));
  return out;
}

py::dict costDict(const runtime::Cost& c) {
  py::dict d;
  d["seconds"] = c.seconds;
  d["launch_seconds"] = c.launch_seconds;
  d["bound"] = runtime::regimeName(c.regime);
  return d;
}

py::dict modelDict(const CostModel& m) {
  py::dict d, peak;
  d["profile"] = m.profile();
  d["lnc"] = m.lnc();
  peak["float8"] = m.peakFlops(MathClass::kFp8);
  peak["bfloat16"] = m.peakFlops(MathClass::kBf16);
  peak["float32"] = m.peakFlops(MathClass::kFp32);
  d["peak_flops"] = peak;
  d["hbm_bytes_per_s"] = m.hbmBytesPerSecond();
  d["link_bytes_per_s"] = m.linkBytesPerSecond();
  const CostConstants& k = m.constants();
  d["launch_overhead_s"] = k.launch_overhead_s;
  d["host_device_bytes_per_s"] = k.host_device_bytes_per_s;
  d["transfer_latency_s"] = k.transfer_latency_s;
  d["compile_s"] = k.compile_s;
  d["collective_latency_s"] = k.collective_latency_s;
  return d;
}

CostModel modelFrom(const std::string& profile, int lnc, const py::dict& overrides) {
  CostConstants k;
  for (auto [key, value] : overrides) {
    const std::string name = py::str(key);
    const double v = value.cast<double>();
    if (v < 0) throw py::value_error("cost model constant " + name + " must be >= 0, got " + std::to_string(v));
    if (name == "launch_overhead_s") k.launch_overhead_s = v;
    else if (name == "host_device_bytes_per_s") k.host_device_bytes_per_s = v;
    else if (name == "transfer_latency_s") k.transfer_latency_s = v;
    else if (name == "compile_s") k.compile_s = v;
    else if (name == "collective_latency_s") k.collective_latency_s = v;
    else throw py::value_error("unknown cost model constant '" + name + "'");
  }
  return CostModel(profile, lnc, k);  // std::invalid_argument reaches Python as ValueError (pybind11)
}

// Dicts of many events (a report keeps thousands) built from keys made once
// per process and names, kinds and lanes made once per call: each event then
// pays for its values only.
class EventDicts {
 public:
  // Every field, as profiler.Timeline.events holds them.
  py::dict full(const runtime::DeviceEvent& e) {
    const Keys& k = keys();
    py::dict d;
    put(d, k.kind, kind(e.kind));
    put(d, k.name, name(e.name));
    put(d, k.device, py::int_(e.device));
    put(d, k.stream, py::int_(e.stream));
    put(d, k.issue_ns, py::int_(e.issue_ns));
    put(d, k.host_end_ns, py::int_(e.host_end_ns));
    put(d, k.start_ns, py::int_(e.start_ns));
    put(d, k.end_ns, py::int_(e.end_ns));
    put(d, k.seconds, py::float_(e.seconds));
    put(d, k.launch_seconds, py::float_(e.launch_seconds));
    put(d, k.flops, py::float_(e.flops));
    put(d, k.bytes, py::float_(e.bytes));
    put(d, k.bound, bound(e.regime));
    put(d, k.in_fallback, py::bool_(e.in_fallback));
    put(d, k.continues_launch, py::bool_(e.continues_launch));
    put(d, k.correlation, py::int_(e.correlation));
    return d;
  }
  // As the migration report draws it: a lane "neuron:D stream S", start and
  // duration in ms from t0_ns.
  py::dict drawn(const runtime::DeviceEvent& e, int64_t t0_ns) {
    const Keys& k = keys();
    py::dict d;
    put(d, k.name, name(e.name));
    put(d, k.kind, kind(e.kind));
    put(d, k.lane, lane(e.device, e.stream));
    put(d, k.start_ms, py::float_(static_cast<double>(e.start_ns - t0_ns) / 1e6));
    put(d, k.dur_ms, py::float_(static_cast<double>(e.end_ns - e.start_ns) / 1e6));
    put(d, k.bound, bound(e.regime));
    put(d, k.flops, py::float_(e.flops));
    put(d, k.bytes, py::float_(e.bytes));
    return d;
  }

 private:
  struct Keys {  // interned once, never freed (the interpreter may outlive static destructors)
    PyObject *kind = key("kind"), *name = key("name"), *device = key("device"), *stream = key("stream"),
             *issue_ns = key("issue_ns"), *host_end_ns = key("host_end_ns"), *start_ns = key("start_ns"),
             *end_ns = key("end_ns"), *seconds = key("seconds"), *launch_seconds = key("launch_seconds"),
             *flops = key("flops"), *bytes = key("bytes"), *bound = key("bound"), *in_fallback = key("in_fallback"),
             *continues_launch = key("continues_launch"), *correlation = key("correlation"), *lane = key("lane"),
             *start_ms = key("start_ms"), *dur_ms = key("dur_ms");
    static PyObject* key(const char* s) { return PyUnicode_InternFromString(s); }
  };
  static const Keys& keys() {
    static const Keys* k = new Keys();
    return *k;
  }
  static void put(py::dict& d, PyObject* key, const py::object& v) {
    if (PyDict_SetItem(d.ptr(), key, v.ptr()) != 0) throw py::error_already_set();
  }
  const py::str& name(const std::string* n) {
    auto [it, fresh] = names_.try_emplace(n);
    if (fresh) it->second = py::str(n ? *n : std::string());
    return it->second;
  }
  const py::object& kind(runtime::EventKind k) {
    py::object& s = kinds_[static_cast<size_t>(k)];
    if (!s) s = py::str(runtime::eventKindName(k));
    return s;
  }
  const py::str& bound(runtime::Regime r) {
    auto [it, fresh] = bounds_.try_emplace(r);
    if (fresh) it->second = py::str(runtime::regimeName(r));
    return it->second;
  }
  const py::str& lane(int device, int64_t stream) {
    auto [it, fresh] = lanes_.try_emplace({device, stream});
    if (fresh) it->second = py::str("neuron:" + std::to_string(device) + " stream " + std::to_string(stream));
    return it->second;
  }
  std::unordered_map<const std::string*, py::str> names_;
  std::array<py::object, 8> kinds_;  // by EventKind
  std::map<runtime::Regime, py::str> bounds_;
  std::map<std::pair<int, int64_t>, py::str> lanes_;
};


struct DrawnEvents {
  std::vector<runtime::DeviceEvent> events;
  int64_t t0_ns = 0;
};

const profiler::TimelineApi kApi = {
    profiler::kTimelineApiVersion,
    &runtime::addRecorder,
    &runtime::removeRecorder,
    &runtime::eventCount,
    [](uint64_t from, uint64_t to, std::vector<runtime::DeviceEvent>* out) { *out = runtime::events(from, to); },
    &runtime::pushCorrelation,
    &runtime::popCorrelation,
};

// An NKI launch's work as torch_neuron_sim.nki.cost passes it:
// (instructions per engine, elements per engine, TensorE FLOPs per math class, DMA bytes).
using EngineWorkTuple = std::tuple<std::array<double, runtime::kEngines>, std::array<double, runtime::kEngines>,
                                   std::array<double, 3>, double>;

runtime::EngineWork engineWorkOf(const EngineWorkTuple& t) {
  runtime::EngineWork w;
  w.instructions = std::get<0>(t);
  w.elements = std::get<1>(t);
  w.flops = std::get<2>(t);
  w.dma_bytes = std::get<3>(t);
  return w;
}

py::dict engineCostDict(const runtime::EngineCost& c) {
  py::dict d = costDict(c.total), engines;
  for (size_t e = 0; e < runtime::kEngines; ++e)
    engines[runtime::engineName(static_cast<runtime::Engine>(e))] = c.seconds[e];
  d["engines"] = engines;
  return d;
}

// A summary as Python data (drawn: the longest events as a DrawnEvents).
py::dict summaryDict(runtime::TimelineSummary s, bool drawn) {
  const auto buckets = [](const runtime::BucketSeconds& b) {
    py::dict d;
    for (size_t k = 0; k < runtime::kBuckets; ++k) d[runtime::bucketName(static_cast<runtime::Bucket>(k))] = b[k];
    return d;
  };
  py::list rows;
  for (const auto& r : s.rows) {
    py::dict d = buckets(r.buckets);
    d["name"] = r.name ? *r.name : std::string();
    d["kind"] = runtime::eventKindName(r.kind);
    d["count"] = r.count;
    d["seconds"] = r.seconds;
    d["flops"] = r.flops;
    d["bytes"] = r.bytes;
    rows.append(d);
  }
  py::list busy;
  for (const auto& [stream, seconds] : s.busy) busy.append(py::make_tuple(stream.first, stream.second, seconds));
  py::object longest;
  if (drawn) {
    longest = py::cast(DrawnEvents{std::move(s.longest), s.first_start_ns});
  } else {
    py::list all;
    EventDicts dicts;
    for (const auto& e : s.longest) all.append(dicts.full(e));
    longest = all;
  }
  py::dict out;
  out["rows"] = rows;
  out["breakdown"] = buckets(s.breakdown);
  out["busy"] = busy;
  out["count"] = s.count;
  out["launches"] = s.launches;
  out["compilations"] = s.compilations;
  out["fused_launches"] = s.fused_launches;
  out["first_start_ns"] = s.first_start_ns;
  out["longest"] = longest;
  return out;
}

}  // namespace

void registerProfilerBindings(py::module_& m) {
  m.def("_prof_timeline_api", []() {
    return py::capsule(static_cast<const void*>(&kApi), profiler::kTimelineApiCapsule);
  });
  m.def("_prof_add_recorder", &runtime::addRecorder);
  m.def("_prof_remove_recorder", &runtime::removeRecorder);
  m.def("_prof_event_count", &runtime::eventCount);
  m.def("_prof_events", [](uint64_t from, uint64_t to) {
    py::list out;
    EventDicts dicts;
    for (const auto& e : runtime::events(from, to)) out.append(dicts.full(e));
    return out;
  });
  // The timeline summed up in C++ (timeline_summary.h): rows per (op, kind),
  // the buckets, each stream's busy seconds and the `keep` longest events
  // (drawn: a DrawnEvents, whose dicts() are in the report's form).
  py::class_<DrawnEvents>(m, "_DrawnEvents")
      .def("__len__", [](const DrawnEvents& d) { return d.events.size(); })
      .def("dicts", [](const DrawnEvents& d) {
        py::list out;
        EventDicts dicts;
        for (const auto& e : d.events) out.append(dicts.drawn(e, d.t0_ns));
        return out;
      });
  m.def("_prof_summary", [](uint64_t from, uint64_t to, size_t keep, bool drawn) {
    return summaryDict(runtime::summarize(from, to, keep), drawn);
  }, py::arg("from"), py::arg("to"), py::arg("keep"), py::arg("drawn") = false);
  // The same summary kept in C++ with the cost model of its events, for the
  // migration report: dict() builds what _prof_summary(drawn=True) returns,
  // model() what _prof_cost_model does, when the report is read.
  py::class_<PendingSummary>(m, "_PendingSummary")
      .def("dict", [](const PendingSummary& p) { return summaryDict(p.summary, true); })
      .def("model", [](const PendingSummary& p) { return modelDict(*p.model); });
  m.def("_prof_summary_later", [](uint64_t from, uint64_t to, size_t keep) {
    return PendingSummary{runtime::summarize(from, to, keep), runtime::costModel()};
  });
  m.def("_prof_set_model_clock", &runtime::setModelClock);
  m.def("_prof_model_clock_ns", &runtime::modelClockNs);
  m.def("_prof_cost_model", []() { return modelDict(*runtime::costModel()); });
  m.def("_prof_set_cost_model", [](const std::string& profile, int lnc, const py::dict& overrides) {
    runtime::setCostModel(modelFrom(profile, lnc, overrides));
  });
  m.def("_prof_model_figures", [](const std::string& profile, int lnc, const py::dict& overrides) {
    return modelDict(modelFrom(profile, lnc, overrides));
  });
  // The model's answer for one op described in Python: for tests and docs.
  m.def("_prof_op_cost", [](const std::string& profile, int lnc, const std::string& op,
                            const std::vector<std::pair<std::vector<int64_t>, std::string>>& inputs,
                            const std::vector<std::pair<std::vector<int64_t>, std::string>>& outputs) {
    const CostModel model = modelFrom(profile, lnc, py::dict());
    const runtime::Work w = runtime::workOf(runtime::formulaOf(op), shapesOf(inputs), shapesOf(outputs));
    py::dict d = costDict(model.kernel(w));
    d["flops"] = w.flops;
    d["bytes"] = w.bytes;
    return d;
  });
  m.def("_prof_transfer_cost", [](const std::string& profile, int lnc, double bytes) {
    return costDict(modelFrom(profile, lnc, py::dict()).transfer(bytes));
  });
  m.def("_prof_collective_cost", [](const std::string& profile, int lnc, const std::string& name, double bytes,
                                    int world) {
    return costDict(modelFrom(profile, lnc, py::dict()).collective(name, bytes, world));
  });
  m.def("_prof_recording", &profiler::recording);
  m.def("_prof_now_ns", &runtime::wallNowNs);
  // A compiled graph: [(op name, [(sizes, dtype)] inputs, outputs, bytes crossing the graph's boundary)].
  // Matmul-like kernels read and write all their tensors; fused ones only the boundary's.
  m.def("_prof_register_graph",
        [](const std::string& name,
           const std::vector<std::tuple<std::string, std::vector<std::pair<std::vector<int64_t>, std::string>>,
                                        std::vector<std::pair<std::vector<int64_t>, std::string>>, double>>& nodes) {
          std::vector<runtime::Work> kernels;
          for (const auto& [op, ins, outs, boundary_bytes] : nodes) {
            const runtime::OpFormula f = runtime::formulaOf(op);
            runtime::Work w = runtime::workOf(f, shapesOf(ins), shapesOf(outs));
            if (!runtime::isLibraryKernel(f)) w.bytes = boundary_bytes;
            kernels.push_back(w);
          }
          return profiler::registerGraph(name, std::move(kernels));
        });
  m.def("_prof_record_graph_run", &profiler::recordGraphRun);
  // NKI kernels: the model's cost of a launch's work, and one launch as a device event.
  m.def("_prof_nki_constants", [] {
    const runtime::EngineConstants k;
    py::dict d;
    d["engine_hz"] = k.engine_hz;
    d["issue_cycles"] = k.issue_cycles;
    d["dma_fixed_s"] = k.dma_fixed_s;
    return d;
  });
  m.def("_prof_nki_cost", [](const EngineWorkTuple& work) {
    return engineCostDict(runtime::engineCost(*runtime::costModel(), engineWorkOf(work)));
  });
  m.def("_prof_record_nki_launch", [](const std::string& name, int device, int64_t issue_ns,
                                      const EngineWorkTuple& work) {
    const runtime::EngineWork w = engineWorkOf(work);
    return engineCostDict(profiler::recordNkiLaunch(name, device, issue_ns, w));
  });
  m.def("_prof_record_collective", &profiler::recordCollective);
  m.def("_prof_record_graph_compile", &profiler::recordGraphCompile);
  m.def("_prof_record_graph_launch", [](const std::string& name, int device, double flops, double bytes,
                                        const std::string& dtype) {
    profiler::recordGraphLaunch(name, device, flops, bytes, mathOf(dtype));
  });
}

}  // namespace neuron_sim::bindings
