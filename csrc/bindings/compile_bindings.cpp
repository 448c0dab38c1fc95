// torch_neuron_sim._C's compile cache (torch_neuron_sim.execution.compile_cache), its
// metrics (torch_neuronx.metrics), and the launch of a compiled graph with its buffers
// (torch_neuron_sim.compile).
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <ATen/EmptyTensor.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include "aten/execution/compile_cache.h"
#include "aten/execution/dtype_policy.h"
#include "aten/memory/allocator.h"
#include "bindings/bindings.h"
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

void registerCompileBindings(py::module_& m) {
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
}

}  // namespace neuron_sim::bindings
