// The default random generator of each neuron device: a counter-based state
// of 16 bytes (seed, offset), as torch_neuronx's Philox generator has. CPU
// kernels draw the numbers (the real backend draws dropout masks on the host
// too): each random op gets a host generator seeded from (seed, offset), and
// the offset advances. So neuron's stream is reproducible, restorable from
// its 16-byte state, and independent of the CPU generator.
#pragma once
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/GeneratorImpl.h>

namespace neuron_sim {

class NeuronGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit NeuronGeneratorImpl(c10::DeviceIndex index, uint64_t seed);
  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  void set_state(const c10::TensorImpl& state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  // A host generator for the next random op, seeded from (seed, offset);
  // advances the offset. Takes the generator's mutex.
  at::Generator nextHostGenerator();

 private:
  NeuronGeneratorImpl* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

const at::Generator& defaultGenerator(c10::DeviceIndex index);

// Where random ops on neuron draw. false (default, as TorchNeuron): no random
// op is native there, so the CPU fallback draws from the CPU default
// generator. true (NEURON_SIM_RNG=device): from the device's generator, an
// independent stream, modelling a release with native random ops.
bool deviceRngStream();
void setDeviceRngStream(bool on);
// The host generator a CPU kernel draws from on behalf of a neuron generator
// (a fresh one per op: concurrent ops never share a host generator).
at::Generator hostGeneratorOf(const at::Generator& g);

// A random op with no Generator? argument (native_dropout) draws from the CPU
// default generator inside its CPU kernel. While alive, that generator draws
// the neuron generator's next numbers instead; its own state is put back
// afterwards, so the CPU stream neither feeds nor notices the op. (Other
// threads drawing CPU numbers during that window would see the swap.)
class HostDefaultGeneratorRedirect {
 public:
  explicit HostDefaultGeneratorRedirect(const at::Generator& device_generator);
  ~HostDefaultGeneratorRedirect();
  HostDefaultGeneratorRedirect(const HostDefaultGeneratorRedirect&) = delete;
  HostDefaultGeneratorRedirect& operator=(const HostDefaultGeneratorRedirect&) = delete;

 private:
  at::Tensor saved_;
};

}  // namespace neuron_sim
