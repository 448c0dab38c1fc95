// torch_neuron_sim._C's random-number functions: each device's default
// generator (torch_neuron_sim.random), under the generator's own mutex.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <ATen/ops/empty.h>
#include <torch/csrc/utils/pybind.h>

#include <cstring>
#include <mutex>

#include "aten/device/generator.h"
#include "bindings/bindings.h"

namespace neuron_sim::bindings {

void registerRandomBindings(py::module_& m) {
  // Where random ops on neuron draw (NEURON_SIM_RNG): 0 cpu, 1 device (the
  // release: ops that run on the device), 2 all (the fallback's too).
  m.def("_set_rng_source", [](int source) {
    TORCH_CHECK(source >= 0 && source <= 2, "rng source must be 0 (cpu), 1 (device) or 2 (all)");
    setRngSource(static_cast<RngSource>(source));
  });
  m.def("_rng_source", [] { return static_cast<int>(rngSource()); });
  // A device's default generator as a torch.Generator (torch_neuronx._C._get_default_generator).
  m.def("_get_default_generator", [](int i) { return defaultGenerator(static_cast<c10::DeviceIndex>(i)); });
  // The seam where code outside an op's kernel (a compiled graph's random
  // ops) draws from a device's stream: a CPU generator seeded from the
  // device generator's (seed, offset), the offset advanced as a native op's draw advances it.
  m.def("_host_generator", [](int i, uint64_t numbers) {
    return hostGeneratorOf(defaultGenerator(static_cast<c10::DeviceIndex>(i)), numbers);
  }, py::arg("device"), py::arg("numbers") = kPhiloxBlock);
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
}

}  // namespace neuron_sim::bindings
