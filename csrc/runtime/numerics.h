// Trainium's arithmetic where it differs from the CPU's (docs/numerics.md):
// stochastic rounding (NEURON_RT_STOCHASTIC_ROUNDING_EN/_SEED) and the
// compiler's auto-cast (NEURON_CC_FLAGS). Plain C++: the switches, read from
// the environment at the first op, and the rounding of fp32 values to the
// device's narrower formats. The ATen side (aten/execution/numerics.h)
// applies them where a kernel writes its output.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

namespace neuron_sim::runtime::numerics {

enum Rule : uint32_t {
  kStochastic = 1u << 0,       // NEURON_RT_STOCHASTIC_ROUNDING_EN=1
  kAutoCastMatmult = 1u << 1,  // --auto-cast matmult
  kAutoCastAll = 1u << 2,      // --auto-cast all
  kUnread = 1u << 31,          // the environment is read at the next op
};

// The formats a value is rounded to: the bits of mantissa and the smallest
// normal exponent decide every rounding (tf32 is fp32's range with fp16's mantissa).
enum class Format : uint8_t { kBFloat16, kFloat16, kTf32, kFloat8E4M3, kFloat8E5M2 };
const char* formatName(Format f);

namespace detail {
extern std::atomic<uint32_t> g_rules;
extern std::atomic<uint64_t> g_seed;
extern std::atomic<uint8_t> g_auto_cast_type;
}

// The active rules: one relaxed load (kUnread until the first op reads the
// environment, so the first op takes the slow path once).
inline uint32_t rules() { return detail::g_rules.load(std::memory_order_relaxed); }

// What the last read found, without a lock (the op path's reads).
inline uint64_t seed() { return detail::g_seed.load(std::memory_order_relaxed); }
inline Format autoCastType() { return static_cast<Format>(detail::g_auto_cast_type.load(std::memory_order_relaxed)); }

struct Settings {
  bool stochastic = false;
  uint64_t seed = 0;
  const char* auto_cast = "none";  // none | matmult | all
  Format auto_cast_type = Format::kBFloat16;
  std::string cc_flags;  // NEURON_CC_FLAGS as read
};

// Reads the environment into the rules and returns them. A malformed
// NEURON_CC_FLAGS --auto-cast/--auto-cast-type value or a non-integer seed
// throws std::invalid_argument with the device's message; the rules stay
// unread, so the next op reads the environment again.
uint32_t readEnvironment();
// The rules in effect (reads the environment if no op has yet).
Settings settings();
// Forget what was read: the next op reads the environment again.
void reset();

// A counter-based stream: each rounded tensor takes the next stream number,
// each element the random bits hash(seed, stream, index). The same program
// draws the same bits run to run.
uint64_t nextStream();

// Rounds n fp32 values to `f`, writing fp32 values exactly representable in
// it (in and out may be the same). Stochastic: up with probability equal to
// the discarded fraction of an ulp; else to nearest, ties to even. NaN stays
// NaN; a value past the format's largest finite one is left to the cast
// that stores it.
void roundStochastic(const float* in, float* out, int64_t n, Format f, uint64_t seed, uint64_t stream);
void roundNearest(const float* in, float* out, int64_t n, Format f);

}  // namespace neuron_sim::runtime::numerics
