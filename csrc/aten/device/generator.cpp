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

// The Mersenne Twister state one op draws from: its 624 words are splitmix64
// of the op's key, each word independent of the others (mt19937's own seeding
// is a serial loop), and the engine starts at the head of a full block, so
// its first 623 numbers need no twist: neither cost then falls on every dropout.
at::mt19937_data_pod hostEngineState(uint64_t key) {
  at::mt19937_data_pod d;
  d.seed_ = key;
  d.left_ = at::MERSENNE_STATE_N;
  d.seeded_ = true;
  d.next_ = 0;
  for (int i = 0; i < at::MERSENNE_STATE_N; i += 2) {
    const uint64_t w = mix(key + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull);
    d.state_[i] = static_cast<uint32_t>(w);
    d.state_[i + 1] = static_cast<uint32_t>(w >> 32);
  }
  return d;
}

void setEngineState(at::CPUGeneratorImpl* host, const at::mt19937_data_pod& state) {
  at::mt19937 engine = host->engine();  // a copy; constructing one would seed it
  engine.set_data(state);
  host->set_engine(engine);
}

uint64_t nextKeyOf(const at::Generator& g, uint64_t numbers) {
  // As on cuda, a random op on the device takes only a generator of the device.
  TORCH_CHECK(g.device().type() == kNeuron, "Expected a 'neuron' device type for generator but found '",
              c10::DeviceTypeName(g.device().type(), /*lower_case=*/true), "'");
  return g.get<NeuronGeneratorImpl>()->nextHostKey(numbers);
}

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

uint64_t NeuronGeneratorImpl::nextHostKey(uint64_t numbers) {
  const uint64_t blocks = numbers == 0 ? 1 : (numbers + kPhiloxBlock - 1) / kPhiloxBlock;
  std::lock_guard<std::mutex> g(mutex_);
  const uint64_t key = mix(seed_ ^ mix(offset_));
  offset_ += blocks * kPhiloxBlock;
  return key;
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
  const at::mt19937_data_pod state = hostEngineState(nextKeyOf(g, numbers));
  thread_local at::Generator spare;  // a new CPUGeneratorImpl would run mt19937's seeding
  if (!spare.defined() || spare.getIntrusivePtr().use_count() > 1) spare = at::make_generator<at::CPUGeneratorImpl>();
  auto* host = spare.get<at::CPUGeneratorImpl>();
  std::lock_guard<std::mutex> lock(host->mutex_);
  setEngineState(host, state);
  host->set_next_float_normal_sample(std::nullopt);
  host->set_next_double_normal_sample(std::nullopt);
  return spare;
}

// The engines are swapped directly (no state tensors): the redirect costs a
// few kilobytes of copying per dropout, not a serialisation of both states.
HostDefaultGeneratorRedirect::HostDefaultGeneratorRedirect(const at::Generator& device_generator, uint64_t numbers) {
  const at::mt19937_data_pod state = hostEngineState(nextKeyOf(device_generator, numbers));
  auto* cpu = at::check_generator<at::CPUGeneratorImpl>(at::detail::getDefaultCPUGenerator());
  std::lock_guard<std::mutex> lock(cpu->mutex_);
  saved_engine_ = cpu->engine().data();
  saved_float_normal_ = cpu->next_float_normal_sample();
  saved_double_normal_ = cpu->next_double_normal_sample();
  setEngineState(cpu, state);
  cpu->set_next_float_normal_sample(std::nullopt);
  cpu->set_next_double_normal_sample(std::nullopt);
}

HostDefaultGeneratorRedirect::~HostDefaultGeneratorRedirect() {
  auto* cpu = at::check_generator<at::CPUGeneratorImpl>(at::detail::getDefaultCPUGenerator());
  std::lock_guard<std::mutex> lock(cpu->mutex_);
  setEngineState(cpu, saved_engine_);
  cpu->set_next_float_normal_sample(saved_float_normal_);
  cpu->set_next_double_normal_sample(saved_double_normal_);
}

}  // namespace neuron_sim
