// The upward path: the few places where C++ below this layer must call
// Python. Each is a plain function pointer owned by the C++ that calls it,
// set here at import to a function that takes the GIL and calls Python:
//   fallback logger   aten/execution/fallback_policy.h  setFallbackAnnouncer   (execution/tracking.py's logger)
//   fallback reporter aten/execution/fallback_policy.h  setFallbackReporter    (report/report.py's recorder)
//   reclaim hook      aten/memory/allocator.h           setReclaimHook         (gc.collect before an OOM retry)
//   stack capture     aten/memory/memory_history.h      history::setStackCapture (the allocating Python frames)
//   collective report distributed/collective_stats.h    setCollectiveReporter  (report/report.py's recorder)
//   rounding reporter aten/execution/numerics.h         setRoundingReporter    (report/report.py's recorder)
//   copy router       aten/kernels/copy.h               setCopyRouter          (torch_neuronx's _nrt_copy_* entry points,
//                                                                              only while a test wraps them)
//   lowering query    aten/execution/graph_lowering.h   setLoweringQuery       (compile/graph_check.py: whether the device
//                                                                              compiler lowers an op met inside a launch)
// Each callback gives up quietly once the interpreter is finalizing, and
// reports a Python error as unraisable: the op that triggered it goes on.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <torch/csrc/utils/pybind.h>

#include "aten/execution/fallback_policy.h"
#include "aten/execution/graph_lowering.h"
#include "aten/execution/numerics.h"
#include "aten/kernels/copy.h"
#include "aten/memory/allocator.h"
#include "aten/memory/memory_history.h"
#include "bindings/bindings.h"
#include "distributed/collective_stats.h"

#include <memory>
#include <vector>

namespace neuron_sim::bindings {
namespace {

bool pythonUsable() { return Py_IsInitialized() && !_Py_IsFinalizing(); }

// Calls a Python callable kept in `slot` (leaked on purpose: called until interpreter exit).
template <typename... Args>
void callPython(py::object* slot, const char* what, const Args&... args) {
  if (!slot || !pythonUsable()) return;
  py::gil_scoped_acquire gil;
  try {
    (*slot)(args...);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable(what);
  }
}

py::object* g_logger = nullptr;
py::object* g_reporter = nullptr;
py::object* g_collective_reporter = nullptr;
py::object* g_router = nullptr;
py::object* g_rounding_reporter = nullptr;
py::object* g_lowering = nullptr;

void announceThroughPython(const std::string& name, const char* why) {
  callPython(g_logger, "torch_neuron_sim fallback logger", name, why);
}
void reportThroughPython(const std::string& name) { callPython(g_reporter, "torch_neuron_sim migration report", name); }
void reportRoundingThroughPython(const std::string& name) {
  callPython(g_rounding_reporter, "torch_neuron_sim migration report", name);
}

void reportCollectiveThroughPython(const std::string& name, uint64_t bytes) {
  if (!g_collective_reporter || !pythonUsable()) return;
  py::gil_scoped_acquire gil;
  try {
    (*g_collective_reporter)(name, bytes);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("torch_neuron_sim collective report");
  }
}

// Before retrying an allocation that did not fit: collect Python reference
// cycles, which may be all that keeps some device tensors alive.
void collectGarbage() {
  if (!pythonUsable()) return;
  py::gil_scoped_acquire gil;
  try {
    py::module_::import("gc").attr("collect")();
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("torch_neuron_sim OOM reclaim");
  }
}

// The calling thread's Python stack, innermost frame first. Ops run with the
// GIL released, so take it back: the thread's frames are intact while it
// waits in C++. The history calls this with no arena or history lock held,
// so waiting for the GIL cannot deadlock against them. Threads without
// Python frames (autograd workers) get an empty stack.
history::Stack capturePythonStack() {
  auto frames = std::make_shared<std::vector<history::Frame>>();
  if (!pythonUsable()) return frames;
  py::gil_scoped_acquire gil;
  PyFrameObject* f = PyEval_GetFrame();
  Py_XINCREF(f);
  while (f) {
    PyCodeObject* code = PyFrame_GetCode(f);
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    const char* name = PyUnicode_AsUTF8(code->co_name);
    if (!file || !name) PyErr_Clear();
    frames->push_back({file ? file : "?", name ? name : "?", PyFrame_GetLineNumber(f)});
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
  }
  return frames;
}

// Asked once per op, from a compiled graph's launch: an error is reported
// as unraisable and the op has no lowering (it falls back, as in eager mode).
bool lowersThroughPython(const std::string& name) {
  if (!g_lowering || !pythonUsable()) return false;
  py::gil_scoped_acquire gil;
  try {
    return py::cast<bool>((*g_lowering)(name));
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("torch_neuron_sim graph lowering");
  } catch (const py::cast_error&) {
  }
  return false;
}

// A host<->device copy handed to Python. Unlike the hooks above, its errors
// are the copy's: they propagate to the caller.
void routeThroughPython(const at::Tensor& src, const at::Tensor& dst) {
  TORCH_CHECK(g_router && pythonUsable(), "torch_neuron_sim: copy router called without Python");
  py::gil_scoped_acquire gil;
  try {
    (*g_router)(src, dst);
  } catch (py::error_already_set& e) {
    TORCH_CHECK(false, "copy through torch_neuronx._C._nrt_copy_*: ", e.what());
  }
}

void keep(py::object*& slot, py::object fn) {
  if (!slot) slot = new py::object();
  *slot = std::move(fn);
}

}  // namespace

void registerPythonCallbacks(py::module_& m) {
  setReclaimHook(&collectGarbage);
  history::setStackCapture(&capturePythonStack);
  m.def("_set_fallback_logger", [](py::object fn) {
    keep(g_logger, std::move(fn));
    setFallbackAnnouncer(&announceThroughPython);
  });
  m.def("_set_fallback_reporter", [](py::object fn) {
    keep(g_reporter, std::move(fn));
    setFallbackReporter(&reportThroughPython);
  });
  m.def("_set_rounding_reporter", [](py::object fn) {
    keep(g_rounding_reporter, std::move(fn));
    setRoundingReporter(&reportRoundingThroughPython);
  });
  m.def("_set_collective_reporter", [](py::object fn) {
    const bool on = !fn.is_none();
    keep(g_collective_reporter, std::move(fn));
    distributed::setCollectiveReporter(on ? &reportCollectiveThroughPython : nullptr);
  });
  m.def("_set_graph_lowering", [](py::object fn) {
    keep(g_lowering, std::move(fn));
    setLoweringQuery(&lowersThroughPython);
  });
  m.def("_set_copy_router", [](py::object fn) {
    if (fn.is_none()) {
      setCopyRouter(nullptr);
      return;
    }
    keep(g_router, std::move(fn));
    setCopyRouter(&routeThroughPython);
  });
}

}  // namespace neuron_sim::bindings
