// Where each block of device memory came from: the Python stack of every
// allocation while torch.neuron.memory._record_memory_history() is on (or
// NEURON_SIM_GUARD needs allocation sites), a trace of allocator actions, and
// snapshots in torch.cuda.memory._snapshot()'s format. Called from the
// allocator only when runtime::kHistory or kGuard is set: free otherwise.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace pybind11 { class module_; }

namespace neuron_sim::history {

void recordAlloc(int device, const void* data, size_t requested);
void recordFree(const void* data, size_t requested);
void recordOom(int device, size_t requested, uint64_t device_free);
// "  File "x.py", line 3, in f" lines of the block's allocation, innermost last.
std::string allocationSite(const void* data);

// _record_memory_history, _snapshot, guard checks, fault injection, limits.
void registerMemoryBindings(pybind11::module_& m);

}  // namespace neuron_sim::history
