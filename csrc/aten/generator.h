// The default random generator of each neuron device: a counter-based state
// of 16 bytes (seed, offset), as torch_neuronx's Philox generator has. CPU
// kernels draw the numbers (the real backend draws dropout masks on the host
// too): each random op gets a host generator seeded from (seed, offset), and
// the offset advances. So neuron's stream is reproducible, restorable from
// its 16-byte state, and independent of the CPU generator.
#pragma once
#include <ATen/core/Generator.h>
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
  // The host generator for the next random op (advances the offset).
  at::Generator nextHostGenerator();

 private:
  NeuronGeneratorImpl* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
  at::Generator host_;
};

const at::Generator& defaultGenerator(c10::DeviceIndex index);
// The host generator a CPU kernel draws from on behalf of a neuron generator.
at::Generator hostGeneratorOf(const at::Generator& g);

}  // namespace neuron_sim
