// The unboxed path of the hottest native ops (fast_path.cpp).
#pragma once
#include <torch/library.h>

#include <optional>
#include <string>

namespace neuron_sim {

// The unboxed kernel of a native op that has one ("aten::add.Tensor"),
// registered in place of the boxed path; nullopt for every other op.
std::optional<torch::CppFunction> unboxedKernel(const std::string& name);

}  // namespace neuron_sim
