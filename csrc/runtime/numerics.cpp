#include "runtime/numerics.h"
#include "runtime/environment.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace neuron_sim::runtime::numerics {
namespace detail {
std::atomic<uint32_t> g_rules{kUnread};
std::atomic<uint64_t> g_seed{0};
std::atomic<uint8_t> g_auto_cast_type{0};
}
namespace {

std::mutex mu;       // guards the settings below while the environment is read
Settings current;    // what the last successful read found
std::atomic<uint64_t> next_stream{0};

struct Shape {
  int mantissa;  // explicit mantissa bits
  int emin;      // exponent of the smallest normal value
};

Shape shapeOf(Format f) {
  switch (f) {
    case Format::kBFloat16: return {7, -126};
    case Format::kFloat16: return {10, -14};
    case Format::kTf32: return {10, -126};
    case Format::kFloat8E4M3: return {3, -6};
    case Format::kFloat8E5M2: return {2, -14};
  }
  return {23, -126};
}

// The compiler's option values (neuronx-cc's --auto-cast and --auto-cast-type).
const char* const kAutoCast[] = {"none", "matmult", "all"};
struct TypeName {
  const char* name;
  Format format;
};
const TypeName kAutoCastTypes[] = {{"bf16", Format::kBFloat16}, {"fp16", Format::kFloat16},
                                   {"tf32", Format::kTf32}, {"fp8_e4m3", Format::kFloat8E4M3}};

[[noreturn]] void invalidChoice(const std::string& flag, const std::string& value, const std::string& choices) {
  // The compiler's argument error, which the device reports when the op compiles.
  throw std::invalid_argument("neuronx-cc: error: argument " + flag + ": invalid choice: '" + value +
                              "' (choose from " + choices + ") [NEURON_CC_FLAGS=\"" +
                              envValue("NEURON_CC_FLAGS") + "\"]");
}

// The flags as the compiler reads them: "--flag value" or "--flag=value", the
// last occurrence wins; flags it does not model are passed over (they reach
// the compiler).
void parseCcFlags(const std::string& flags, Settings& s) {
  std::vector<std::string> words;
  std::istringstream in(flags);
  for (std::string w; in >> w;) words.push_back(w);
  for (size_t i = 0; i < words.size(); ++i) {
    std::string flag = words[i], value;
    const size_t eq = flag.find('=');
    if (eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    if (flag != "--auto-cast" && flag != "--auto-cast-type") continue;
    if (eq == std::string::npos) {
      if (i + 1 >= words.size() || words[i + 1].rfind("--", 0) == 0)
        throw std::invalid_argument("neuronx-cc: error: argument " + flag + ": expected one argument");
      value = words[++i];
    }
    if (flag == "--auto-cast") {
      const char* found = nullptr;
      for (const char* c : kAutoCast)
        if (value == c) found = c;
      if (!found) invalidChoice(flag, value, "'none', 'matmult', 'all'");
      s.auto_cast = found;
    } else {
      bool found = false;
      for (const TypeName& t : kAutoCastTypes)
        if (value == t.name) {
          s.auto_cast_type = t.format;
          found = true;
        }
      if (!found) invalidChoice(flag, value, "'bf16', 'fp16', 'tf32', 'fp8_e4m3'");
    }
  }
}

Settings fromEnvironment() {
  Settings s;
  s.stochastic = runtimeSwitch("NEURON_RT_STOCHASTIC_ROUNDING_EN");
  if (const std::string text = envValue("NEURON_RT_STOCHASTIC_ROUNDING_SEED"); !text.empty()) {
    const char* seed = text.c_str();
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(seed, &end, 0);
    if (errno != 0 || *end != '\0' || seed[0] == '-')
      throw std::invalid_argument(std::string("NEURON_RT_STOCHASTIC_ROUNDING_SEED must be a non-negative integer, "
                                              "got '") + seed + "'");
    s.seed = v;
  }
  s.cc_flags = envValue("NEURON_CC_FLAGS");
  parseCcFlags(s.cc_flags, s);
  return s;
}

uint32_t rulesOf(const Settings& s) {
  uint32_t r = 0;
  if (s.stochastic) r |= kStochastic;
  if (std::strcmp(s.auto_cast, "matmult") == 0) r |= kAutoCastMatmult;
  if (std::strcmp(s.auto_cast, "all") == 0) r |= kAutoCastAll;
  return r;
}

// splitmix64's finalizer: a counter-based generator (every element's bits
// depend only on (seed, stream, index), never on the order of the draws).
inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

const char* formatName(Format f) {
  switch (f) {
    case Format::kBFloat16: return "bf16";
    case Format::kFloat16: return "fp16";
    case Format::kTf32: return "tf32";
    case Format::kFloat8E4M3: return "fp8_e4m3";
    case Format::kFloat8E5M2: return "fp8_e5m2";
  }
  return "?";
}

uint32_t readEnvironment() {
  std::lock_guard<std::mutex> lock(mu);
  Settings s = fromEnvironment();  // throws on a malformed value: the rules stay unread
  const uint32_t r = rulesOf(s);
  detail::g_seed.store(s.seed, std::memory_order_relaxed);
  detail::g_auto_cast_type.store(static_cast<uint8_t>(s.auto_cast_type), std::memory_order_relaxed);
  current = std::move(s);
  detail::g_rules.store(r, std::memory_order_relaxed);
  return r;
}

Settings settings() {
  if (rules() & kUnread) readEnvironment();
  std::lock_guard<std::mutex> lock(mu);
  return current;
}

void reset() { detail::g_rules.store(kUnread, std::memory_order_relaxed); }

uint64_t nextStream() { return next_stream.fetch_add(1, std::memory_order_relaxed); }

namespace {

// Puts each finite nonzero x on the format's grid: x measured in ulps of its
// binade (exact), `toInteger(q, i)` picks the neighbouring integer, and the
// result is scaled back. Zeros, infinities and NaN keep their value.
template <typename ToInteger>
void roundToGrid(const float* in, float* out, int64_t n, Format f, ToInteger toInteger) {
  const Shape s = shapeOf(f);
  for (int64_t i = 0; i < n; ++i) {
    const float x = in[i];
    if (!std::isfinite(x) || x == 0.0f) {
      out[i] = x;
      continue;
    }
    const int e = std::max(std::ilogb(x), s.emin);
    out[i] = std::ldexp(toInteger(std::ldexp(x, s.mantissa - e), i), e - s.mantissa);
  }
}

}  // namespace

void roundStochastic(const float* in, float* out, int64_t n, Format f, uint64_t seed, uint64_t stream) {
  const uint64_t key = mix(seed ^ mix(stream + 0x9e3779b97f4a7c15ULL));
  if (f == Format::kBFloat16) {
    // bf16 is fp32's upper half: add 16 random bits below it and truncate.
    // The magnitude rounds up with probability equal to the discarded fraction.
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &in[i], 4);
      if ((bits & 0x7fffffffu) <= 0x7f800000u)  // NaN keeps its bits
        bits = (bits + static_cast<uint32_t>(mix(key + static_cast<uint64_t>(i)) >> 48)) & 0xffff0000u;
      std::memcpy(&out[i], &bits, 4);
    }
    return;
  }
  roundToGrid(in, out, n, f, [key](float q, int64_t i) {
    const float lo = std::floor(q);
    const float frac = q - lo;  // a multiple of 2^-23 at least: 24 random bits are exact
    const float u = static_cast<float>(mix(key + static_cast<uint64_t>(i)) >> 40) * 0x1p-24f;
    return lo + (u < frac ? 1.0f : 0.0f);
  });
}

void roundNearest(const float* in, float* out, int64_t n, Format f) {
  roundToGrid(in, out, n, f, [](float q, int64_t) { return std::nearbyint(q); });  // ties to even
}

}  // namespace neuron_sim::runtime::numerics
