#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "aten/device/generator.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>

#include "runtime/device.h"
#include "aten/neuron.h"

namespace neuron_sim {
namespace {

// splitmix64: decorrelates consecutive (seed, offset) pairs.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::atomic<RngSource> g_rng_source{RngSource::kDevice};

}  // namespace

RngSource rngSource() { return g_rng_source.load(std::memory_order_relaxed); }
void setRngSource(RngSource source) { g_rng_source.store(source); }
bool deviceRngStream() { return rngSource() != RngSource::kCpu; }

NeuronGeneratorImpl::NeuronGeneratorImpl(c10::DeviceIndex index, uint64_t seed)
    : c10::GeneratorImpl(neuronDevice(index), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void NeuronGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;  // as on the real backend: a new seed restarts the stream
}

uint64_t NeuronGeneratorImpl::seed() {
  set_current_seed(c10::detail::getNonDeterministicRandom());
  return seed_;
}

void NeuronGeneratorImpl::set_state(const c10::TensorImpl& state) {
  TORCH_CHECK(state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && state.device().is_cpu(),
              "RNG state must be a torch.ByteTensor on the CPU");
  const size_t n = static_cast<size_t>(state.numel());
  TORCH_CHECK(n == 16 || n == 8, "RNG state is wrong size: expected 16 bytes (seed, offset) or 8 (seed), got ", n);
  const auto* bytes = static_cast<const uint8_t*>(state.data());
  uint64_t seed = 0, offset = 0;
  std::memcpy(&seed, bytes, 8);
  if (n == 16) std::memcpy(&offset, bytes + 8, 8);
  seed_ = seed;
  offset_ = offset;
}

c10::intrusive_ptr<c10::TensorImpl> NeuronGeneratorImpl::get_state() const {
  at::Tensor t = at::empty({16}, at::TensorOptions().dtype(at::kByte).device(at::kCPU));
  std::memcpy(t.data_ptr<uint8_t>(), &seed_, 8);
  std::memcpy(t.data_ptr<uint8_t>() + 8, &offset_, 8);
  return t.unsafeReleaseIntrusivePtr();
}

at::Generator NeuronGeneratorImpl::nextHostGenerator(uint64_t numbers) {
  const uint64_t blocks = numbers == 0 ? 1 : (numbers + kPhiloxBlock - 1) / kPhiloxBlock;
  uint64_t seed;
  {
    std::lock_guard<std::mutex> g(mutex_);
    seed = mix(seed_ ^ mix(offset_));
    offset_ += blocks * kPhiloxBlock;
  }
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

NeuronGeneratorImpl* NeuronGeneratorImpl::clone_impl() const {
  auto* g = new NeuronGeneratorImpl(device().index(), seed_);
  g->offset_ = offset_;
  return g;
}

const at::Generator& defaultGenerator(c10::DeviceIndex index) {
  static std::mutex mu;
  static std::deque<at::Generator> gens;  // stable addresses, one per device
  std::lock_guard<std::mutex> g(mu);
  if (gens.empty()) {
    int n = runtime::deviceCount();
    for (int i = 0; i < n; ++i)
      gens.push_back(at::make_generator<NeuronGeneratorImpl>(i, c10::detail::getNonDeterministicRandom()));
  }
  if (index < 0) index = static_cast<c10::DeviceIndex>(runtime::currentDevice());
  TORCH_CHECK(index >= 0 && index < static_cast<int>(gens.size()), "Device index ", index,
                    " is out of range. Valid range is 0 to ", gens.size() - 1, " for this process");
  return gens[index];
}

at::Generator hostGeneratorOf(const at::Generator& g, uint64_t numbers) {
  // As on cuda, a random op on the device takes only a generator of the device.
  TORCH_CHECK(g.device().type() == kNeuron, "Expected a 'neuron' device type for generator but found '",
              c10::DeviceTypeName(g.device().type(), /*lower_case=*/true), "'");
  return g.get<NeuronGeneratorImpl>()->nextHostGenerator(numbers);
}

// The engines are swapped directly (no state tensors): the redirect costs a
// few kilobytes of copying per dropout, not a serialisation of both states.
HostDefaultGeneratorRedirect::HostDefaultGeneratorRedirect(const at::Generator& device_generator, uint64_t numbers) {
  at::Generator host = hostGeneratorOf(device_generator, numbers);
  auto* cpu = at::check_generator<at::CPUGeneratorImpl>(at::detail::getDefaultCPUGenerator());
  std::lock_guard<std::mutex> lock(cpu->mutex_);
  saved_engine_ = cpu->engine();
  saved_float_normal_ = cpu->next_float_normal_sample();
  saved_double_normal_ = cpu->next_double_normal_sample();
  cpu->set_engine(host.get<at::CPUGeneratorImpl>()->engine());
  cpu->set_next_float_normal_sample(std::nullopt);
  cpu->set_next_double_normal_sample(std::nullopt);
}

HostDefaultGeneratorRedirect::~HostDefaultGeneratorRedirect() {
  auto* cpu = at::check_generator<at::CPUGeneratorImpl>(at::detail::getDefaultCPUGenerator());
  std::lock_guard<std::mutex> lock(cpu->mutex_);
  cpu->set_engine(saved_engine_);
  cpu->set_next_float_normal_sample(saved_float_normal_);
  cpu->set_next_double_normal_sample(saved_double_normal_);
}

}  // namespace neuron_sim
