// The path of one op without a kernel of its own on neuron (execution.cpp).
// Every such op reaches it through the PrivateUse1 fallback; these are the
// entry points others need.
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string>
#include <vector>

namespace neuron_sim {

// Ops with a CompositeExplicitAutograd kernel never reach the fallback; the
// native set names some of them, so they get the path registered directly.
// The hottest of them get their unboxed kernel instead (fast_path.h).
void registerNativeKernels(const std::vector<std::string>& names);
// Composite ops registered without an autograd formula: autograd passes them through.
void registerAutogradPassthrough(const std::vector<std::string>& names);
// Takes both registrations of these ops away: the dispatcher routes them as
// before they were registered.
void removeNativeKernels(const std::vector<std::string>& names);

// One op through the boxed path (native or fallback), as the dispatcher
// would run it: for the unboxed kernels' calls that are not the common case.
void runBoxed(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace neuron_sim
