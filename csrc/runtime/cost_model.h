// The cost model of the simulated Trainium: how long the device would take
// for one op, copy, compilation or collective. A roofline per op: FLOPs and
// bytes (from shapes and dtypes) against one logical NeuronCore's share of
// the chip's peak compute and HBM bandwidth, plus fixed costs for an eager
// launch, host<->device transfers and compilation. Plain C++, no torch: the
// equations and constants are in docs/profiling.md.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace neuron_sim::runtime {

// Which peak an op's arithmetic runs at. 64-bit types are computed in 32
// bits on the device (docs/semantics.md), so they count as fp32.
enum class MathClass : uint8_t { kFp8 = 0, kBf16 = 1, kFp32 = 2 };

// What the model needs of one tensor: the sizes its formulas read and its
// element size as stored on the device (8-byte types are stored as 4-byte
// ones). A fixed-size summary, so the op path records one without allocating.
struct TensorShape {
  int64_t elements = 1;  // the product of the sizes
  int dims = 0;
  int64_t first = 1, second_last = 1, last = 1;  // sizes[0], sizes[dims - 2], sizes[dims - 1] (1 where absent)
  int elem_bytes = 4;
  MathClass math = MathClass::kFp32;
  static TensorShape of(const int64_t* sizes, size_t dims, int elem_bytes, MathClass math);
  static TensorShape of(const std::vector<int64_t>& sizes, int elem_bytes, MathClass math) {
    return of(sizes.data(), sizes.size(), elem_bytes, math);
  }
  int64_t numel() const { return elements; }
};

// Tensors as the model reads them: a view of shapes held elsewhere.
struct ShapeList {
  const TensorShape* data = nullptr;
  size_t count = 0;
  ShapeList() = default;
  ShapeList(const TensorShape* d, size_t n) : data(d), count(n) {}
  ShapeList(const std::vector<TensorShape>& v) : data(v.data()), count(v.size()) {}  // NOLINT: implicit on purpose
  size_t size() const { return count; }
  bool empty() const { return count == 0; }
  const TensorShape& operator[](size_t i) const { return data[i]; }
  const TensorShape* begin() const { return data; }
  const TensorShape* end() const { return data + count; }
};

// The arithmetic of one op, by formula: matmul-like ops count 2*M*N*K,
// elementwise ops one FLOP per output element, reductions one per input.
enum class OpFormula : uint8_t { kElementwise, kReduction, kMatmul, kBatchedMatmul, kAddmm, kConvolution,
                                 kConvolutionBackward, kAttention, kAttentionBackward, kDataMovement };
OpFormula formulaOf(std::string_view op_name);  // "aten::mm", "aten::add" ... (overload name ignored)
// Matmuls, convolutions and attention: their own kernels even inside a
// compiled graph (they read and write HBM); other ops fuse there.
inline bool isLibraryKernel(OpFormula f) {
  return f != OpFormula::kElementwise && f != OpFormula::kReduction && f != OpFormula::kDataMovement;
}

struct Work {
  double flops = 0;
  double bytes = 0;  // HBM traffic: every input read once, every output written once
  MathClass math = MathClass::kFp32;
};
Work workOf(OpFormula f, ShapeList inputs, ShapeList outputs);

// One Trainium generation's chip figures (AWS Neuron architecture pages for
// Trainium, Trainium2 and Trainium3; trn1 from older Neuron docs).
struct ChipFigures {
  std::string name;
  int physical_cores;        // NeuronCores per chip
  double peak_flops[3];      // dense FLOP/s per chip: fp8, bf16, fp32 (MathClass order)
  double hbm_bytes_per_s;    // per chip
  double link_bytes_per_s;   // NeuronLink per chip, for collectives (assumption, docs/profiling.md)
};
// trn1, trn2, trn3; throws std::invalid_argument on another name.
const ChipFigures& chipFigures(std::string_view profile);

// The constants that are not chip figures. Defaults are assumptions named and
// justified in docs/profiling.md; every one can be overridden.
struct CostConstants {
  double launch_overhead_s = 15e-6;    // host runtime cost of one eager NEFF launch (nrt_execute)
  double host_device_bytes_per_s = 25e9;  // H2D / D2H DMA over PCIe (effective)
  double transfer_latency_s = 5e-6;    // fixed cost of one host<->device DMA
  double compile_s = 0.5;              // neuronx-cc compiling one eager op's NEFF
  double collective_latency_s = 10e-6; // fixed cost of one collective step
};

enum class Regime : uint8_t { kCompute, kMemory, kFallback, kTransfer, kCompile, kCollective, kLaunch };
inline const char* regimeName(Regime r) {
  switch (r) {
    case Regime::kCompute: return "compute";
    case Regime::kMemory: return "memory";
    case Regime::kFallback: return "fallback";
    case Regime::kTransfer: return "transfer";
    case Regime::kCompile: return "compile";
    case Regime::kCollective: return "collective";
    case Regime::kLaunch: return "launch";
  }
  return "?";
}

struct Cost {
  double seconds = 0;         // total, launch overhead included
  double launch_seconds = 0;  // of which fixed launch/latency cost
  Regime regime = Regime::kMemory;
};

// Rates of one logical NeuronCore: the chip's figures divided by the physical
// cores per chip, times LNC (a logical core is LNC physical cores).
class CostModel {
 public:
  CostModel(std::string_view profile, int lnc, CostConstants constants = {});
  const std::string& profile() const { return chip_.name; }
  int lnc() const { return lnc_; }
  const CostConstants& constants() const { return k_; }
  double peakFlops(MathClass m) const { return chip_.peak_flops[static_cast<int>(m)] * share_; }
  double hbmBytesPerSecond() const { return chip_.hbm_bytes_per_s * share_; }
  double linkBytesPerSecond() const { return chip_.link_bytes_per_s * share_; }
  double ridgePoint(MathClass m) const { return peakFlops(m) / hbmBytesPerSecond(); }  // FLOPs per byte

  Cost kernel(const Work& w) const;                 // one eager native op
  Cost graph(const Work& w) const;                  // one compiled graph launch (one launch overhead)
  // A compiled graph as the kernels of one NEFF: a roofline per kernel,
  // summed, and one launch overhead for the whole graph.
  Cost graph(const std::vector<Work>& kernels) const;
  Cost transfer(double bytes) const;                // host <-> device
  Cost deviceCopy(double bytes) const;              // device -> device: read and write in HBM
  Cost compile() const;
  // A collective named like "all_reduce", "all_gather_into_tensor", "reduce_scatter", "broadcast"
  // (ring algorithms), or "send"/"recv" (one transfer); `bytes` is its message size as nccl-tests
  // counts it (docs/profiling.md).
  Cost collective(std::string_view name, double bytes, int world_size) const;

 private:
  ChipFigures chip_;
  int lnc_;
  double share_;  // fraction of the chip one logical core owns
  CostConstants k_;
};

}  // namespace neuron_sim::runtime
