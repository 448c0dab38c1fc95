// The path of one op without a kernel of its own on neuron (execution.cpp).
// Every such op reaches it through the PrivateUse1 fallback; these are the
// entry points others need.
#pragma once
#include <string>
#include <vector>

namespace neuron_sim {

// Ops with a CompositeExplicitAutograd kernel never reach the fallback; the
// native set names some of them, so they get the path registered directly.
void registerNativeKernels(const std::vector<std::string>& names);

}  // namespace neuron_sim
