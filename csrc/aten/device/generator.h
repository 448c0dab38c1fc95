// The default random generator of each neuron device: a counter-based state
// of 16 bytes (seed, offset), as torch_neuronx's Philox generator has. CPU
// kernels draw the numbers: each random op that runs on the device gets a
// host generator seeded from (seed, offset), and the offset advances by the
// numbers the op consumes. So neuron's stream is reproducible, restorable
// from its 16-byte state, and independent of the CPU generator.
#pragma once
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/MT19937RNGEngine.h>
#include <c10/core/GeneratorImpl.h>

#include <optional>

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
  // The key of the next random op's host stream, from (seed, offset);
  // advances the offset by `numbers` rounded up to whole Philox blocks.
  // Takes the generator's mutex.
  uint64_t nextHostKey(uint64_t numbers);

 private:
  NeuronGeneratorImpl* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

const at::Generator& defaultGenerator(c10::DeviceIndex index);

// Where random ops on neuron draw (NEURON_SIM_RNG). kDevice (default, as the
// release): ops that run on the device (native_dropout, fused attention's
// dropout, compiled graphs) draw from the device's generator; random ops that
// fall back run on the CPU and draw from the CPU default generator. kCpu:
// every random op draws from the CPU stream (dropout equals CPU dropout).
// kAll: the fallback's random ops draw from the device's generator too,
// modelling a release where every random op is native.
enum class RngSource : uint8_t { kCpu, kDevice, kAll };
RngSource rngSource();
void setRngSource(RngSource source);
// Ops that run on the device draw from its generator.
bool deviceRngStream();
// The CPU fallback's random ops draw from the device's generator too.
inline bool fallbackDrawsDevice() { return rngSource() == RngSource::kAll; }

// Philox yields four 32-bit numbers per counter value: an op's draw moves the
// offset by whole blocks, as cuda's does.
constexpr uint64_t kPhiloxBlock = 4;
// The host generator a CPU kernel draws from on behalf of a neuron generator,
// for an op consuming `numbers` random numbers. Its state is the op's own
// (concurrent ops never share one); the object is reused per thread while
// nothing else holds it.
at::Generator hostGeneratorOf(const at::Generator& g, uint64_t numbers = kPhiloxBlock);

// A random op with no Generator? argument (native_dropout) draws from the CPU
// default generator inside its CPU kernel. While alive, that generator draws
// the neuron generator's next numbers instead; its own state is put back
// afterwards, so the CPU stream neither feeds nor notices the op. (Other
// threads drawing CPU numbers during that window would see the swap.)
class HostDefaultGeneratorRedirect {
 public:
  HostDefaultGeneratorRedirect(const at::Generator& device_generator, uint64_t numbers);
  ~HostDefaultGeneratorRedirect();
  HostDefaultGeneratorRedirect(const HostDefaultGeneratorRedirect&) = delete;
  HostDefaultGeneratorRedirect& operator=(const HostDefaultGeneratorRedirect&) = delete;

 private:
  at::mt19937_data_pod saved_engine_;  // plain data: an at::mt19937 would seed itself when constructed
  std::optional<float> saved_float_normal_;
  std::optional<double> saved_double_normal_;
};

}  // namespace neuron_sim
