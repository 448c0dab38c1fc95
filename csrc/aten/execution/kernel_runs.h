// Runs of device kernels that are no dispatcher operator - NKI kernel
// launches, which op tracking records as "nki_<kernel name>" - counted by
// name. op_table.cpp lists them with the operators (opCounts, opStats) and
// clears them with them. Not on the per-op path (a mutex and a string).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace neuron_sim {

void recordNamedKernelRun(const std::string& name);
std::vector<std::pair<std::string, uint64_t>> namedKernelRuns();  // (name, runs) with runs > 0
void clearNamedKernelRuns();

}  // namespace neuron_sim
