#include "runtime/correlation.h"

#include <vector>

namespace neuron_sim::runtime {
namespace {
thread_local std::vector<uint64_t> t_correlation;  // nested CPU ops: the innermost is last
}  // namespace

void pushCorrelation(uint64_t id) { t_correlation.push_back(id); }
void popCorrelation() {
  if (!t_correlation.empty()) t_correlation.pop_back();
}
uint64_t currentCorrelation() { return t_correlation.empty() ? 0 : t_correlation.back(); }

}  // namespace neuron_sim::runtime
