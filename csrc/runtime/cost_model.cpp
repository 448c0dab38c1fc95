#include "runtime/cost_model.h"

#include <algorithm>
#include <stdexcept>

namespace neuron_sim::runtime {
namespace {

constexpr double T = 1e12;

double bytesOf(const TensorShape& t) { return static_cast<double>(t.numel()) * t.elem_bytes; }

double lastDim(ShapeList ts, size_t i) {
  if (i >= ts.size() || ts[i].dims == 0) return 1;
  return static_cast<double>(ts[i].last);
}

double numelOf(ShapeList ts, size_t i) { return i < ts.size() ? static_cast<double>(ts[i].numel()) : 0; }

// Weights of a convolution are [C_out, C_in / groups, k...]: one output
// element takes C_in / groups * prod(k) multiply-adds.
double macsPerOutput(ShapeList ts, size_t weight) {
  if (weight >= ts.size() || ts[weight].dims == 0 || ts[weight].first == 0) return 0;
  return numelOf(ts, weight) / static_cast<double>(ts[weight].first);
}

// Attention over q [..., L, E], k [..., S, E], v [..., S, Ev]: the two
// matmuls QK^T and PV, 2*L*S*E + 2*L*S*Ev per batch and head.
double attentionFlops(ShapeList ts, size_t q) {
  if (q + 2 >= ts.size() || ts[q].dims < 2 || ts[q + 1].dims < 2) return 0;
  const double e = lastDim(ts, q), s = static_cast<double>(ts[q + 1].second_last);
  const double ev = lastDim(ts, q + 2);
  const double rows = numelOf(ts, q) / std::max(e, 1.0);  // batch * heads * L
  return 2 * rows * s * e + 2 * rows * s * ev;
}

}  // namespace

TensorShape TensorShape::of(const int64_t* sizes, size_t dims, int elem_bytes, MathClass math) {
  TensorShape t;
  for (size_t i = 0; i < dims; ++i) t.elements *= sizes[i];
  t.dims = static_cast<int>(dims);
  if (dims >= 1) t.first = sizes[0], t.last = sizes[dims - 1];
  if (dims >= 2) t.second_last = sizes[dims - 2];
  t.elem_bytes = elem_bytes;
  t.math = math;
  return t;
}

OpFormula formulaOf(std::string_view name) {
  if (auto dot = name.find('.'); dot != std::string_view::npos) name = name.substr(0, dot);
  if (auto colons = name.find("::"); colons != std::string_view::npos) name = name.substr(colons + 2);
  if (name == "mm" || name == "bmm" || name == "matmul" || name == "linear" || name == "_grouped_mm")
    return OpFormula::kMatmul;
  if (name == "addmm" || name == "baddbmm" || name == "addbmm" || name == "addmv") return OpFormula::kAddmm;
  if (name == "linear_backward") return OpFormula::kBatchedMatmul;
  if (name == "convolution" || name == "_convolution" || name == "conv2d" || name == "conv1d" ||
      name == "conv3d")
    return OpFormula::kConvolution;
  if (name == "convolution_backward") return OpFormula::kConvolutionBackward;
  if (name == "_scaled_dot_product_fused_attention_overrideable" || name == "scaled_dot_product_attention" ||
      name == "_native_multi_head_attention")
    return OpFormula::kAttention;
  if (name == "_scaled_dot_product_fused_attention_overrideable_backward") return OpFormula::kAttentionBackward;
  static constexpr std::string_view kReductions[] = {
      "sum", "mean", "amax", "amin", "max", "min", "prod", "norm", "linalg_vector_norm", "var", "std",
      "var_mean", "std_mean", "argmax", "argmin", "all", "any", "logsumexp", "cumsum", "cumprod", "nansum",
      "_foreach_norm", "batch_norm_stats", "native_layer_norm", "_fused_rms_norm", "rms_norm"};
  for (auto r : kReductions)
    if (name == r) return OpFormula::kReduction;
  static constexpr std::string_view kMoves[] = {
      "cat", "index_select", "gather", "scatter", "scatter_add", "index", "embedding", "index_copy",
      "index_add", "_index_put_impl_", "clone", "copy", "_to_copy", "contiguous", "replication_pad1d",
      "replication_pad2d", "replication_pad3d", "constant_pad_nd", "fill", "zero", "repeat", "flip", "roll",
      "stack", "embedding_dense_backward", "index_select_backward"};
  for (auto m : kMoves)
    if (name == m || (name.size() == m.size() + 1 && name.back() == '_' && name.substr(0, m.size()) == m))
      return OpFormula::kDataMovement;
  return OpFormula::kElementwise;
}

Work workOf(OpFormula f, ShapeList in, ShapeList out) {
  Work w;
  for (const auto& t : in) w.bytes += bytesOf(t);
  for (const auto& t : out) w.bytes += bytesOf(t);
  w.math = !in.empty() ? in[0].math : (!out.empty() ? out[0].math : MathClass::kFp32);
  const double out0 = numelOf(out, 0);
  switch (f) {
    case OpFormula::kMatmul:  // mm(A[M,K], B[K,N]) -> [M,N]: 2*M*N*K
      w.flops = 2 * out0 * lastDim(in, 0);
      break;
    case OpFormula::kAddmm:  // addmm(bias, A, B): the product, plus the bias add
      w.flops = 2 * out0 * lastDim(in, 1) + out0;
      if (in.size() > 1) w.math = in[1].math;
      break;
    case OpFormula::kBatchedMatmul:  // linear_backward(input, grad_out, weight): two products
      w.flops = 4 * numelOf(in, 1) * lastDim(in, 0);
      break;
    case OpFormula::kConvolution:  // (input, weight, ...): 2 * outputs * C_in/groups * prod(kernel)
      w.flops = 2 * out0 * macsPerOutput(in, 1);
      break;
    case OpFormula::kConvolutionBackward:  // (grad_out, input, weight, ...): grad input and grad weight
      w.flops = 4 * numelOf(in, 0) * macsPerOutput(in, 2);
      if (in.size() > 1) w.math = in[1].math;
      break;
    case OpFormula::kAttention:
      w.flops = attentionFlops(in, 0);
      break;
    case OpFormula::kAttentionBackward:  // (grad_out, q, k, v, ...): recompute + 2 products per matmul
      w.flops = 2.5 * attentionFlops(in, 1);
      if (in.size() > 1) w.math = in[1].math;
      break;
    case OpFormula::kReduction:
      w.flops = numelOf(in, 0);
      break;
    case OpFormula::kElementwise:
      w.flops = out0;
      break;
    case OpFormula::kDataMovement:
      w.flops = 0;
      break;
  }
  return w;
}

const ChipFigures& chipFigures(std::string_view profile) {
  // Dense FLOP/s per chip (fp8, bf16, fp32) and HBM bandwidth: AWS Neuron
  // architecture pages. trn1: 190/190/48 TFLOPS, 0.82 TB/s (fp8 = bf16 rate).
  // trn2: 1,299/667/181 TFLOPS, 2.9 TB/s. trn3: 2,517 (MXFP8)/671/183
  // TFLOPS, 4.9 TB/s. NeuronLink per chip is an assumption (docs/profiling.md).
  static const ChipFigures chips[] = {
      {"trn1", 2, {190 * T, 190 * T, 48 * T}, 0.82e12, 0.384e12},
      {"trn2", 8, {1299 * T, 667 * T, 181 * T}, 2.9e12, 1.28e12},
      {"trn3", 8, {2517 * T, 671 * T, 183 * T}, 4.9e12, 2.56e12},
  };
  for (const auto& c : chips)
    if (c.name == profile) return c;
  throw std::invalid_argument("unknown Trainium profile '" + std::string(profile) + "'; use trn1, trn2 or trn3");
}

CostModel::CostModel(std::string_view profile, int lnc, CostConstants constants)
    : chip_(chipFigures(profile)), lnc_(lnc), k_(constants) {
  if (lnc < 1 || lnc > chip_.physical_cores || chip_.physical_cores % lnc != 0)
    throw std::invalid_argument("LNC=" + std::to_string(lnc) + " does not divide the " +
                                std::to_string(chip_.physical_cores) + " NeuronCores of a " + chip_.name + " chip");
  share_ = static_cast<double>(lnc) / chip_.physical_cores;
}

Cost CostModel::graph(const Work& w) const {
  const double compute = w.flops / peakFlops(w.math);
  const double memory = w.bytes / hbmBytesPerSecond();
  Cost c;
  c.launch_seconds = k_.launch_overhead_s;
  c.seconds = c.launch_seconds + std::max(compute, memory);
  c.regime = compute >= memory && w.flops > 0 ? Regime::kCompute : Regime::kMemory;
  return c;
}

Cost CostModel::graph(const std::vector<Work>& kernels) const {
  double compute_bound = 0, memory_bound = 0;
  for (const Work& w : kernels) {
    const double compute = w.flops / peakFlops(w.math), memory = w.bytes / hbmBytesPerSecond();
    if (compute >= memory && w.flops > 0) compute_bound += compute;
    else memory_bound += memory;
  }
  Cost c;
  c.launch_seconds = k_.launch_overhead_s;
  c.seconds = c.launch_seconds + compute_bound + memory_bound;
  c.regime = compute_bound >= memory_bound && compute_bound > 0 ? Regime::kCompute : Regime::kMemory;
  return c;
}

Cost CostModel::kernel(const Work& w) const { return graph(w); }

Cost CostModel::transfer(double bytes) const {
  return {k_.transfer_latency_s + bytes / k_.host_device_bytes_per_s, k_.transfer_latency_s, Regime::kTransfer};
}

Cost CostModel::deviceCopy(double bytes) const {
  // Read once and written once in HBM.
  return {k_.launch_overhead_s + 2 * bytes / hbmBytesPerSecond(), k_.launch_overhead_s, Regime::kMemory};
}

Cost CostModel::compile() const { return {k_.compile_s, 0, Regime::kCompile}; }

Cost CostModel::collective(std::string_view name, double bytes, int world_size) const {
  // Ring algorithms over `world_size` ranks; `bytes` is the message size as
  // nccl-tests counts it (the tensor for all-reduce, reduce and broadcast; the
  // gathered output for all-gather and gather; the input for reduce-scatter,
  // scatter and all-to-all). Each rank sends: an all-reduce 2*(n-1)/n of it in
  // 2*(n-1) steps; all-gather, reduce-scatter, gather, scatter and all-to-all
  // (n-1)/n in n-1 steps; a broadcast or a reduce the whole buffer in n-1
  // pipelined steps; a barrier only latency. A send or recv moves the whole
  // tensor between two cores in one step.
  const auto has = [&](std::string_view s) { return name.find(s) != std::string_view::npos; };
  const int n = std::max(world_size, 1);
  double steps = n - 1, traffic = (n - 1.0) / n;
  if (has("reduce_scatter")) {
    // the default: (n-1)/n in n-1 steps
  } else if (has("all_reduce") || has("allreduce")) {
    steps = 2.0 * (n - 1);
    traffic = 2.0 * (n - 1) / n;
  } else if (has("broadcast") || name == "reduce" || has("::reduce_")) {
    traffic = n > 1 ? 1.0 : 0.0;
  } else if (has("barrier")) {
    traffic = 0;
  } else if (name == "send" || name == "recv") {
    steps = 1;
    traffic = 1.0;
  }
  steps = std::max(steps, 1.0);
  const double latency = steps * k_.collective_latency_s;
  return {latency + bytes * traffic / linkBytesPerSecond(), latency, Regime::kCollective};
}

}  // namespace neuron_sim::runtime
