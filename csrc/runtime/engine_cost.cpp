#include "runtime/engine_cost.h"

namespace neuron_sim::runtime {

const char* engineName(Engine e) {
  switch (e) {
    case Engine::kTensor: return "tensor";
    case Engine::kVector: return "vector";
    case Engine::kScalar: return "scalar";
    case Engine::kGpSimd: return "gpsimd";
    case Engine::kDma: return "dma";
  }
  return "?";
}

EngineCost engineCost(const CostModel& model, const EngineWork& w, const EngineConstants& k) {
  const double issue_s = k.issue_cycles / k.engine_hz;
  EngineCost c;
  double tensor = 0;
  for (int m = 0; m < 3; ++m)
    if (w.flops[m] > 0) tensor += w.flops[m] / model.peakFlops(static_cast<MathClass>(m));
  c.seconds[0] = tensor + w.instructions[0] * issue_s;
  // Vector, Scalar and GpSimd process one element of every partition per cycle.
  for (size_t e = 1; e <= 3; ++e) c.seconds[e] = w.elements[e] / k.engine_hz + w.instructions[e] * issue_s;
  c.seconds[4] = w.dma_bytes / model.hbmBytesPerSecond() + w.instructions[4] * k.dma_fixed_s;
  double busy = 0;
  for (double s : c.seconds) busy += s;
  const double compute = c.seconds[0] + c.seconds[1] + c.seconds[2] + c.seconds[3];
  const double launch_s = model.constants().launch_overhead_s;
  c.total = {busy + launch_s, launch_s, compute >= c.seconds[4] ? Regime::kCompute : Regime::kMemory};
  return c;
}

}  // namespace neuron_sim::runtime
