#include "aten/execution/kernel_runs.h"

#include <map>
#include <mutex>

namespace neuron_sim {
namespace {

std::mutex g_mu;
std::map<std::string, uint64_t>& runs() {
  static auto* r = new std::map<std::string, uint64_t>();  // outlives threads still recording at exit
  return *r;
}

}  // namespace

void recordNamedKernelRun(const std::string& name) {
  std::lock_guard<std::mutex> g(g_mu);
  ++runs()[name];
}

std::vector<std::pair<std::string, uint64_t>> namedKernelRuns() {
  std::lock_guard<std::mutex> g(g_mu);
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const auto& [name, n] : runs())
    if (n) out.emplace_back(name, n);
  return out;
}

void clearNamedKernelRuns() {
  std::lock_guard<std::mutex> g(g_mu);
  for (auto& [name, n] : runs()) n = 0;
}

}  // namespace neuron_sim
