// Copies between host and device (copy.cpp), counted: a native op makes
// none, a fallback op copies its inputs out and its results back. The count
// is what torch_neuron_sim.testing.count_cpu_bounce_calls reads.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace neuron_sim {

uint64_t hostDeviceCopies();  // since the process started
// Copies a fallback stands for without making them (its inputs read in place: fallback_alias.h).
void countHostDeviceCopies(uint64_t n);
// Whether a router (below) sees every copy between host and device just now.
bool copyRouted();

// A hook that sees every copy between host and device: torch_neuronx's test
// helpers count host bounces by wrapping its _C._nrt_copy_* entry points, and
// while one is wrapped (torch_neuron_sim/torch_neuronx/__init__.py) every such copy is
// handed to the hook, which copies through them.
using CopyRouter = void (*)(const at::Tensor& src, const at::Tensor& dst);
void setCopyRouter(CopyRouter router);  // nullptr (the default): copies run directly

}  // namespace neuron_sim
