// Which of the arena's debugging aids are on. They make allocation and free
// do extra work, so the hot path reads one word (a relaxed atomic load) and
// takes the slow path only when some bit is set.
#pragma once
#include <atomic>
#include <cstdint>

namespace neuron_sim::runtime {

enum DebugMode : uint32_t {
  kPoison = 1u << 0,     // NEURON_SIM_POISON: fill new and freed blocks with 0xFF (NaN)
  kGuard = 1u << 1,      // NEURON_SIM_GUARD: guard bytes around blocks, checked on free
  kProtect = 1u << 2,    // NEURON_SIM_PROTECT: arena pages inaccessible outside kernels
  kFailAlloc = 1u << 3,  // NEURON_SIM_FAIL_ALLOC_AT / inject_oom: an allocation will fail
  kHistory = 1u << 4,    // _record_memory_history: allocations record their Python stack
};

namespace detail {
extern std::atomic<uint32_t> g_debug_modes;
}

// The modes that are on. Initialised from the environment when the library loads.
inline uint32_t debugModes() { return detail::g_debug_modes.load(std::memory_order_relaxed); }
inline bool debugMode(DebugMode m) { return (debugModes() & m) != 0; }
void setDebugMode(DebugMode m, bool on);

// The byte new and freed blocks are filled with under kPoison: 0xFF makes
// every float dtype NaN (f32, f16, bf16, f64) and every signed integer -1.
constexpr unsigned char kPoisonByte = 0xFF;

}  // namespace neuron_sim::runtime
