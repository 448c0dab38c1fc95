// torch_neuron_sim._kineto: the Python side of the neuron device's Kineto
// activity profiler (profiler/kineto_session.cpp). Its own extension, built
// with USE_KINETO and torch's Kineto headers (setup.py), which reach no other
// file; torch_neuron_sim.profiler connects it to _C's device timeline at import.
#include <pybind11/pybind11.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <stdexcept>
#include <string>

#include "profiler/kineto_session.h"
#include "profiler/timeline_api.h"

PYBIND11_MODULE(_kineto, m) {
  using neuron_sim::profiler::TimelineApi;
  m.doc() = "The neuron device's Kineto activity profiler (device rows in torch.profiler)";
  m.def("_connect", [](pybind11::capsule api) {
    auto* table = static_cast<const TimelineApi*>(api.get_pointer());
    if (api.name() == nullptr || std::string(api.name()) != neuron_sim::profiler::kTimelineApiCapsule ||
        table->version != neuron_sim::profiler::kTimelineApiVersion)
      throw std::runtime_error("torch_neuron_sim._kineto and _C are from different builds; rebuild (make ext)");
    neuron_sim::profiler::connectTimeline(table);
  });
  m.def("_registered", []() { return torch::profiler::impl::PrivateUse1ProfilerRegistry::instance().hasFactory(); });
}
