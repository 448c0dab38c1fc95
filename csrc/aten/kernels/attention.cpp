// scaled_dot_product_attention on neuron, as the real backend's SDPA backend
// selection routes it (docs/semantics.md, "Attention"): 4-D query/key/value of float32, float16 or bfloat16 with
// equal dtypes take the fused "overrideable" attention op, which is native
// (bias, causal, grouped-query heads, and dropout with a host-drawn mask
// included); anything else decomposes into PyTorch's math path, whose ops
// the native-op table then decides on one by one.
//
// The fused op has no CPU kernel to run on aliased arena memory, so its
// forward and backward are written here as host kernels: execution.cpp runs
// them in place of the CPU redispatch, inside the same native path (arena
// outputs, tracking, compile cache, 64-bit rule).
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ExpandUtils.h>
#include <ATen/SDPBackend.h>
#include <ATen/core/stack.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>

#include <cmath>
#include <limits>
#include <mutex>

#include "aten/device/generator.h"
#include "aten/device/guard.h"
#include "aten/execution/op_table.h"
#include "aten/neuron.h"

namespace neuron_sim {
namespace {

bool attentionDtype(at::ScalarType s) { return s == at::kFloat || s == at::kHalf || s == at::kBFloat16; }

int64_t chooseBackend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const std::optional<at::Tensor>& /*mask*/, double /*dropout_p*/, bool /*is_causal*/,
                      std::optional<double> /*scale*/, bool /*enable_gqa*/) {
  // The fused op has no CPU kernel to fall back to: a native-op table
  // without it (an older release, or every op forced onto the fallback)
  // sends attention down the math path, whose ops can fall back.
  static const c10::OperatorHandle fused_op = c10::Dispatcher::singleton().findSchemaOrThrow(
      "aten::_scaled_dot_product_fused_attention_overrideable", "");
  const bool fused = q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && attentionDtype(q.scalar_type()) &&
                     k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type() &&
                     at::globalContext().userEnabledOverrideableSDP() &&
                     opEntry(fused_op).native.load(std::memory_order_relaxed);
  return static_cast<int64_t>(fused ? at::SDPBackend::overrideable : at::SDPBackend::math);
}

// Grouped-query attention: key/value heads shared by groups of query heads.
int64_t groupsOf(const at::Tensor& q, const at::Tensor& k) {
  const int64_t hq = q.size(1), hk = k.size(1);
  TORCH_CHECK(hk > 0 && hq % hk == 0, "neuron: scaled_dot_product_attention: the number of query heads (", hq,
              ") must be a multiple of the number of key/value heads (", hk, ") for grouped-query attention");
  return hq / hk;
}

at::Tensor expandHeads(const at::Tensor& t, int64_t groups) {
  return groups == 1 ? t : t.repeat_interleave(groups, 1);
}

// Attention scores with the bias and causal mask applied, in float32.
at::Tensor scores(const at::Tensor& q, const at::Tensor& k, const std::optional<at::Tensor>& bias, bool causal,
                  double scale) {
  at::Tensor s = at::matmul(q.to(at::kFloat), k.to(at::kFloat).transpose(-2, -1)).mul_(scale);
  if (bias && bias->defined()) {
    if (bias->scalar_type() == at::kBool)
      s.masked_fill_(bias->logical_not(), -std::numeric_limits<float>::infinity());
    else
      s.add_(bias->to(at::kFloat));
  }
  if (causal) {
    const int64_t L = q.size(-2), S = k.size(-2);
    at::Tensor keep = at::ones({L, S}, q.options().dtype(at::kBool)).tril();
    s.masked_fill_(keep.logical_not(), -std::numeric_limits<float>::infinity());
  }
  return s;
}

// The dropout mask for a seed: drawn on the host, as the real backend does,
// and drawn again from the same seed in the backward pass.
at::Tensor dropoutMask(c10::IntArrayRef shape, double p, uint64_t seed) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::empty(shape, at::TensorOptions().dtype(at::kFloat)).bernoulli_(1.0 - p, g).div_(1.0 - p);
}

// The seed of a dropout mask of `numbers` elements: from the device's
// generator, whose offset advances by them (NEURON_SIM_RNG=cpu: from the CPU
// default generator).
uint64_t drawSeed(c10::DeviceIndex device, uint64_t numbers) {
  at::Generator g = deviceRngStream() ? hostGeneratorOf(defaultGenerator(device), numbers)
                                      : at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(g.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(g)->random64();
}

// float32 without a bias or dropout: PyTorch's CPU flash-attention kernel
// computes what the math below computes (float32 scores, softmax from the
// log-sum-exp, float32 value product; no row is wholly masked) in one pass,
// where the math takes a dozen host ops: a fused op costs what one op costs.
// Reduced precision keeps the math, whose value product stays in float32
// (the flash kernel rounds the probabilities to the input's dtype first).
bool cpuFlashComputes(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool has_bias, double p) {
  return q.dim() == 4 && q.scalar_type() == at::kFloat && !has_bias && p == 0.0 && k.size(-2) > 0 &&
         v.size(-1) == q.size(-1);  // the kernel's one head size
}

// The flash kernel walks the head dimension with unit stride (PyTorch's CPU
// backend sends other layouts down the math path).
at::Tensor unitLastStride(const at::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); }

// A result laid out as torch's meta kernel lays it out (the output in query's
// dimension order, alloc_with_matching_layout; a gradient as empty_like its
// input), so a compiled graph's strides hold.
at::Tensor inLayoutOf(const at::Tensor& result, const at::Tensor& like) {
  // like's own strides when it is dense and of the result's shape, else dense strides in its dimension order
  const std::vector<int64_t> strides = result.sizes().equals(like.sizes()) && like.is_non_overlapping_and_dense()
                                           ? like.strides().vec()
                                           : at::infer_dense_strides(result.sizes(), like.strides());
  if (result.strides().equals(strides)) return result;
  return at::empty_strided(result.sizes(), strides, result.options()).copy_(result);
}

double scaleOf(const at::Tensor& q, std::optional<double> scale) {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

// (query, key, value, attn_bias?, dropout_p, is_causal, return_debug_mask, *, scale?)
//   -> (output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, philox_seed, philox_offset, debug_attn_mask)
void fusedForward(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  auto a = torch::jit::last(*stack, 8);
  const at::Tensor q = a[0].toTensor(), k0 = a[1].toTensor(), v0 = a[2].toTensor();
  const auto bias = a[3].toOptional<at::Tensor>();
  const double p = a[4].toDouble();
  const bool causal = a[5].toBool();
  const auto scale = a[7].toOptional<double>();
  TORCH_CHECK(!a[6].toBool(), "neuron: scaled_dot_product_attention cannot return the debug attention mask");
  TORCH_CHECK(q.dim() == 4 && k0.dim() == 4 && v0.dim() == 4,
              "neuron: _scaled_dot_product_fused_attention_overrideable takes 4-D query, key and value "
              "(batch, heads, sequence, head size); got ", q.dim(), "-D, ", k0.dim(), "-D and ", v0.dim(), "-D");
  const int64_t groups = groupsOf(q, k0);
  const at::Tensor k = expandHeads(k0, groups), v = expandHeads(v0, groups);
  at::Tensor out, lse;
  uint64_t seed = 0;
  if (cpuFlashComputes(q, k, v, bias && bias->defined(), p)) {
    auto [o, l] = at::_scaled_dot_product_flash_attention_for_cpu(unitLastStride(q), unitLastStride(k), unitLastStride(v),
                                                                  0.0, causal, std::nullopt, scale);
    out = inLayoutOf(o, q);
    lse = l.contiguous();
  } else {
    at::Tensor s = scores(q, k, bias, causal, scaleOf(q, scale));
    lse = s.logsumexp(-1);
    at::Tensor probs = (s - lse.unsqueeze(-1)).exp_();
    seed = p > 0 ? drawSeed(q.device().index(), static_cast<uint64_t>(probs.numel())) : 0;
    if (p > 0) probs.mul_(dropoutMask(probs.sizes(), p, seed));
    out = inLayoutOf(at::matmul(probs, v.to(at::kFloat)).to(q.scalar_type()), q);
  }
  const auto i64 = q.options().dtype(at::kLong), i32 = q.options().dtype(at::kInt);
  torch::jit::drop(*stack, 8);
  torch::jit::push(*stack, out, lse, at::empty({0}, i32), at::empty({0}, i32), q.size(-2), k.size(-2),
                   at::scalar_tensor(static_cast<int64_t>(seed), i64), at::scalar_tensor(int64_t{0}, i64),
                   at::empty({0}, q.options()));
}

// (grad_out, query, key, value, attn_bias, grad_input_mask[4], out, logsumexp, cum_seq_q, cum_seq_k,
//  max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, *, scale?)
//   -> (grad_query, grad_key, grad_value, grad_attn_bias)
void fusedBackward(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  auto a = torch::jit::last(*stack, 17);
  const at::Tensor dout = a[0].toTensor().to(at::kFloat), q = a[1].toTensor(), k0 = a[2].toTensor(),
                   v0 = a[3].toTensor();
  const at::Tensor bias = a[4].toTensor();
  const auto mask = a[5].toBoolList();
  const at::Tensor lse = a[7].toTensor();
  const double p = a[12].toDouble();
  const bool causal = a[13].toBool();
  const uint64_t seed = static_cast<uint64_t>(a[14].toTensor().item<int64_t>());
  const double scale = scaleOf(q, a[16].toOptional<double>());
  const int64_t groups = groupsOf(q, k0);
  auto ungroup = [&](const at::Tensor& g) {  // sum the gradients of shared key/value heads
    if (groups == 1) return g;
    auto s = g.sizes();
    return g.reshape({s[0], s[1] / groups, groups, s[2], s[3]}).sum(2);
  };
  if (cpuFlashComputes(q, k0, v0, bias.defined(), p)) {
    auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
        unitLastStride(a[0].toTensor()), unitLastStride(q), unitLastStride(expandHeads(k0, groups)),
        unitLastStride(expandHeads(v0, groups)), unitLastStride(a[6].toTensor()), lse.contiguous(), 0.0, causal,
        std::nullopt, a[16].toOptional<double>());
    torch::jit::drop(*stack, 17);
    torch::jit::push(*stack, mask[0] ? inLayoutOf(dq, q) : at::Tensor(), mask[1] ? inLayoutOf(ungroup(dk), k0) : at::Tensor(),
                     mask[2] ? inLayoutOf(ungroup(dv), v0) : at::Tensor(), at::Tensor());
    return;
  }
  const at::Tensor k = expandHeads(k0, groups).to(at::kFloat), v = expandHeads(v0, groups).to(at::kFloat);
  const std::optional<at::Tensor> b = bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt;
  at::Tensor probs = (scores(q, k, b, causal, scale) - lse.unsqueeze(-1)).exp_();
  at::Tensor drop = p > 0 ? dropoutMask(probs.sizes(), p, seed) : at::Tensor();
  at::Tensor kept = p > 0 ? probs * drop : probs;
  at::Tensor dv = at::matmul(kept.transpose(-2, -1), dout);
  at::Tensor dkept = at::matmul(dout, v.transpose(-2, -1));
  at::Tensor dprobs = p > 0 ? dkept.mul_(drop) : dkept;
  at::Tensor ds = probs * (dprobs - (dprobs * probs).sum(-1, true));  // softmax backward
  at::Tensor dq = at::matmul(ds, k).mul_(scale);
  at::Tensor dk = at::matmul(ds.transpose(-2, -1), q.to(at::kFloat)).mul_(scale);
  at::Tensor dbias;
  if (mask[3] && bias.defined() && bias.scalar_type() != at::kBool)
    dbias = ds.sum_to_size(bias.sizes()).to(bias.scalar_type());
  torch::jit::drop(*stack, 17);
  torch::jit::push(*stack, mask[0] ? inLayoutOf(dq.to(q.scalar_type()), q) : at::Tensor(),
                   mask[1] ? inLayoutOf(ungroup(dk).to(k0.scalar_type()), k0) : at::Tensor(),
                   mask[2] ? inLayoutOf(ungroup(dv).to(v0.scalar_type()), v0) : at::Tensor(), dbias);
}

}  // namespace

static const bool kAttentionKernelsRegistered = [] {
  registerHostKernel("aten::_scaled_dot_product_fused_attention_overrideable", &fusedForward);
  registerHostKernel("aten::_scaled_dot_product_fused_attention_overrideable_backward", &fusedBackward);
  return true;
}();

}  // namespace neuron_sim

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &neuron_sim::chooseBackend)
}  // namespace at::native
