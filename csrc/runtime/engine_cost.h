// The cost of one NKI kernel launch, engine by engine. A kernel is a
// sequence of instructions, each on one NeuronCore engine: TensorE (matmuls
// and transposes, timed by FLOPs at the profile's peak for the operands'
// dtype), the DMA queues (bytes at the core's HBM bandwidth), and VectorE,
// ScalarE and GpSimd (one element per partition per cycle). Every
// instruction also pays a fixed issue cost. The engines are modelled as not
// overlapping: the launch's time is their sum plus one launch overhead
// (docs/nki.md says what that leaves out). Plain C++, no torch.
#pragma once
#include <array>

#include "runtime/cost_model.h"

namespace neuron_sim::runtime {

enum class Engine : uint8_t { kTensor = 0, kVector, kScalar, kGpSimd, kDma };
constexpr size_t kEngines = 5;
const char* engineName(Engine e);

struct EngineWork {
  std::array<double, kEngines> instructions{};  // per Engine
  std::array<double, kEngines> elements{};      // per partition, streamed by Vector/Scalar/GpSimd
  std::array<double, 3> flops{};                // TensorE, per MathClass
  double dma_bytes = 0;
};

// Assumptions (docs/nki.md): the engines' clock, the fixed cycles an
// instruction costs (AWS's NKI ISA pages give ~64 as the minimum initiation
// interval), and the fixed cost of one DMA transfer.
struct EngineConstants {
  double engine_hz = 1.4e9;
  double issue_cycles = 64;
  double dma_fixed_s = 2e-6;
};

struct EngineCost {
  std::array<double, kEngines> seconds{};  // per Engine, issue cost included
  Cost total;                              // the sum, plus the launch overhead
};

EngineCost engineCost(const CostModel& model, const EngineWork& work, const EngineConstants& k = {});

}  // namespace neuron_sim::runtime
