// Where each block of device memory came from: the Python stack of every
// allocation while torch.neuron.memory._record_memory_history() is on (or
// NEURON_SIM_GUARD needs allocation sites), a trace of allocator actions, and
// snapshots in torch.cuda.memory._snapshot()'s format. Called from the
// allocator only when runtime::kHistory or kGuard is set: free otherwise.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace pybind11 { class dict; }

namespace neuron_sim::history {

void recordAlloc(int device, const void* data, size_t requested);
// `block` is where the block started: the address snapshots and traces use.
void recordFree(const void* data, uintptr_t block, size_t requested);
void recordOom(int device, size_t requested, uint64_t device_free);
// "  File "x.py", line 3, in f" lines of the block's allocation, innermost last.
std::string allocationSite(const void* data);

// torch.cuda.memory._record_memory_history's enabled ("state", "all" or none)
// and context (none: sizes without stacks); the trace keeps max_entries.
void recordHistory(const std::optional<std::string>& enabled, const std::optional<std::string>& context,
                   size_t max_entries, bool clear);
// torch.cuda.memory._snapshot()'s structure: segments (one per reserved
// arena, every block) and device_traces.
pybind11::dict snapshot();

}  // namespace neuron_sim::history
