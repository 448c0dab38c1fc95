// Native ops of the device that PyTorch has no CPU kernel for (CUDA-only or
// backend-only ops): linear_backward, _fused_rms_norm_backward and the five
// batch_norm_* helpers of SyncBatchNorm. The device computes them; here each
// is a host kernel built from CPU ops, run on the aliased arena memory like
// any native op, so they never fail with "Could not run ... 'CPU' backend".
// The formulas are the ops' definitions (derivatives of linear, RMSNorm and
// batch normalization); intermediate math in float32 for reduced precision.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <ATen/ATen.h>
#include <torch/library.h>

#include "aten/execution/op_table.h"

namespace neuron_sim {
namespace {

using torch::jit::Stack;

at::ScalarType opmath(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16 ? at::kFloat : t; }

// linear_backward(self, grad_output, weight, output_mask[3]) -> (grad_input, grad_weight, grad_bias).
// As the device: nothing for grad_input unless asked; weight and bias grads together if either is.
void linearBackward(const c10::OperatorHandle&, Stack* stack) {
  auto a = torch::jit::last(*stack, 4);
  const at::Tensor input = a[0].toTensor(), grad = a[1].toTensor(), weight = a[2].toTensor();
  const auto mask = a[3].toBoolList();
  at::Tensor gi, gw, gb;
  // A 2-D call (the common one) goes to mm as it is: matmul and reshape would
  // reach the same mm through views made and dropped on every call.
  const bool flat = grad.dim() == 2 && input.dim() == 2;
  if (mask.get(0)) gi = flat && weight.dim() == 2 ? grad.mm(weight) : at::matmul(grad, weight);
  if (mask.get(1) || mask.get(2)) {
    const at::Tensor g2 = flat ? grad : grad.reshape({-1, grad.size(-1)});
    const at::Tensor x2 = flat ? input : input.reshape({-1, input.size(-1)});
    // g^T x, the product CPU autograd computes for linear's decomposition
    // (addmm's mat2 gradient for a column-major weight.t(), then t()), so
    // the weight gradient rounds as on the CPU.
    gw = g2.t().mm(x2);
    gb = g2.sum(0);
  }
  torch::jit::drop(*stack, 4);
  torch::jit::push(*stack, gi, gw, gb);
}

// _fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight?, output_mask[2])
//   -> (grad_input, grad_weight). y = x * rstd * w with rstd = 1/sqrt(mean(x^2) + eps) over the
// normalized dims: dx = rstd * (g - xhat * mean(g * xhat)), g = dy * w, xhat = x * rstd; dw = sum(dy * xhat).
void fusedRmsNormBackward(const c10::OperatorHandle&, Stack* stack) {
  auto a = torch::jit::last(*stack, 6);
  const at::Tensor dy0 = a[0].toTensor(), x0 = a[1].toTensor();
  const auto shape = a[2].toIntVector();
  const at::Tensor rstd0 = a[3].toTensor();
  const auto weight = a[4].toOptional<at::Tensor>();
  const auto mask = a[5].toBoolList();
  const auto t = opmath(x0.scalar_type());
  const at::Tensor dy = dy0.to(t), x = x0.to(t);
  const int64_t k = static_cast<int64_t>(shape.size()), nd = x.dim();
  std::vector<int64_t> norm_dims, batch_dims;
  for (int64_t d = 0; d < nd; ++d) (d >= nd - k ? norm_dims : batch_dims).push_back(d);
  std::vector<int64_t> rshape(x.sizes().begin(), x.sizes().end());
  for (int64_t d = nd - k; d < nd; ++d) rshape[d] = 1;
  const at::Tensor rstd = rstd0.to(t).reshape(rshape);
  const at::Tensor xhat = x * rstd;
  const bool has_w = weight && weight->defined();
  at::Tensor gi, gw;
  if (mask.get(0)) {
    const at::Tensor g = has_w ? dy * weight->to(t) : dy;
    gi = (rstd * (g - xhat * (g * xhat).mean(norm_dims, /*keepdim=*/true))).to(x0.scalar_type());
  }
  if (mask.get(1) && has_w) {
    at::Tensor prod = dy * xhat;
    gw = (batch_dims.empty() ? prod : prod.sum(batch_dims)).to(weight->scalar_type());
  }
  torch::jit::drop(*stack, 6);
  torch::jit::push(*stack, gi, gw);
}

// Per-channel statistics are over every dim but 1; `channel` reshapes a [C]
// tensor to broadcast against the input.
std::vector<int64_t> reduceDims(const at::Tensor& x) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != 1) dims.push_back(d);
  return dims;
}
at::Tensor channel(const at::Tensor& c, const at::Tensor& like) {
  std::vector<int64_t> shape(like.dim(), 1);
  shape[1] = -1;
  return c.reshape(shape);
}

// batch_norm_stats(input, eps) -> (mean, invstd), biased variance, in float32 for reduced precision.
void batchNormStats(const c10::OperatorHandle&, Stack* stack) {
  auto a = torch::jit::last(*stack, 2);
  const at::Tensor x = a[0].toTensor().to(opmath(a[0].toTensor().scalar_type()));
  const double eps = a[1].toDouble();
  const auto dims = reduceDims(x);
  const at::Tensor mean = x.mean(dims);
  const at::Tensor var = (x - channel(mean, x)).pow(2).mean(dims);
  torch::jit::drop(*stack, 2);
  torch::jit::push(*stack, mean, (var + eps).rsqrt());
}

// batch_norm_elemt(input, weight?, bias?, mean, invstd, eps) -> (x - mean) * invstd * w + b
at::Tensor batchNormElemtOf(c10::ArrayRef<c10::IValue> a) {
  const at::Tensor x0 = a[0].toTensor();
  const auto w = a[1].toOptional<at::Tensor>(), b = a[2].toOptional<at::Tensor>();
  const at::Tensor x = x0.to(opmath(x0.scalar_type()));
  at::Tensor y = (x - channel(a[3].toTensor(), x)) * channel(a[4].toTensor(), x);
  if (w && w->defined()) y = y * channel(*w, x);
  if (b && b->defined()) y = y + channel(*b, x);
  return y.to(x0.scalar_type());
}

void batchNormElemt(const c10::OperatorHandle&, Stack* stack) {
  at::Tensor y = batchNormElemtOf(torch::jit::last(*stack, 6));
  torch::jit::drop(*stack, 6);
  torch::jit::push(*stack, std::move(y));
}

// batch_norm_elemt.out(input, weight?, bias?, mean, invstd, eps, *, out)
void batchNormElemtOut(const c10::OperatorHandle&, Stack* stack) {
  auto a = torch::jit::last(*stack, 7);
  at::Tensor out = a[6].toTensor();
  const at::Tensor y = batchNormElemtOf(a.slice(0, 6));
  if (!out.sizes().equals(y.sizes())) out.resize_(y.sizes());
  out.copy_(y);
  torch::jit::drop(*stack, 7);
  torch::jit::push(*stack, out);
}

// batch_norm_gather_stats_with_counts(input, mean[W,C], invstd[W,C], running_mean?, running_var?,
//   momentum, eps, counts[W]) -> (mean, invstd): the statistics of W groups combined; the running
// statistics move by `momentum` towards them (unbiased variance).
void batchNormGatherStats(const c10::OperatorHandle&, Stack* stack) {
  auto a = torch::jit::last(*stack, 8);
  const at::Tensor means = a[1].toTensor().to(at::kFloat), invstds = a[2].toTensor().to(at::kFloat);
  const auto rm = a[3].toOptional<at::Tensor>(), rv = a[4].toOptional<at::Tensor>();
  const double momentum = a[5].toDouble(), eps = a[6].toDouble();
  const at::Tensor counts = a[7].toTensor().to(at::kFloat).reshape({-1, 1});
  const at::Tensor n = counts.sum();
  const at::Tensor mean = (means * counts).sum(0) / n;
  const at::Tensor vars = invstds.pow(-2) - eps;
  const at::Tensor var = ((vars + (means - mean).pow(2)) * counts).sum(0) / n;
  if (rm && rm->defined()) rm->mul_(1 - momentum).add_(mean.to(rm->scalar_type()) * momentum);
  if (rv && rv->defined()) rv->mul_(1 - momentum).add_((var * n / (n - 1)).to(rv->scalar_type()) * momentum);
  torch::jit::drop(*stack, 8);
  torch::jit::push(*stack, mean, (var + eps).rsqrt());
}

// batch_norm_backward_reduce(grad_out, input, mean, invstd, weight?, input_g, weight_g, bias_g)
//   -> (sum_dy, sum_dy_xmu, grad_weight, grad_bias). The device computes and
// returns all four whatever the flags say (CUDA leaves the unasked ones undefined).
void batchNormBackwardReduce(const c10::OperatorHandle&, Stack* stack) {
  auto a = torch::jit::last(*stack, 8);
  const at::Tensor dy0 = a[0].toTensor(), x0 = a[1].toTensor();
  const auto w = a[4].toOptional<at::Tensor>();
  const auto t = opmath(x0.scalar_type());
  const at::Tensor dy = dy0.to(t), x = x0.to(t);
  const auto dims = reduceDims(x);
  const at::Tensor sum_dy = dy.sum(dims);
  const at::Tensor sum_dy_xmu = (dy * (x - channel(a[2].toTensor(), x))).sum(dims);
  const auto wt = w && w->defined() ? w->scalar_type() : t;
  const at::Tensor grad_weight = (sum_dy_xmu * a[3].toTensor()).to(wt);
  const at::Tensor grad_bias = sum_dy.to(wt, /*non_blocking=*/false, /*copy=*/true);
  torch::jit::drop(*stack, 8);
  torch::jit::push(*stack, sum_dy, sum_dy_xmu, grad_weight, grad_bias);
}

// batch_norm_backward_elemt(grad_out, input, mean, invstd, weight?, sum_dy, sum_dy_xmu, count)
//   -> grad_input = (dy - sum_dy/N - (x - mean) * invstd^2 * sum_dy_xmu/N) * invstd * w, N = sum(count)
void batchNormBackwardElemt(const c10::OperatorHandle&, Stack* stack) {
  auto a = torch::jit::last(*stack, 8);
  const at::Tensor dy0 = a[0].toTensor(), x0 = a[1].toTensor();
  const auto w = a[4].toOptional<at::Tensor>();
  const auto t = opmath(x0.scalar_type());
  const at::Tensor dy = dy0.to(t), x = x0.to(t);
  const at::Tensor n = a[7].toTensor().to(at::kFloat).sum();
  const at::Tensor mean = channel(a[2].toTensor(), x), invstd = channel(a[3].toTensor().to(t), x);
  const at::Tensor mean_dy = channel(a[5].toTensor(), x) / n, mean_dy_xmu = channel(a[6].toTensor(), x) / n;
  at::Tensor gi = (dy - mean_dy - (x - mean) * invstd.pow(2) * mean_dy_xmu) * invstd;
  if (w && w->defined()) gi = gi * channel(*w, x);
  torch::jit::drop(*stack, 8);
  torch::jit::push(*stack, gi.to(x0.scalar_type()));
}

const bool kHostKernelsRegistered = [] {
  registerHostKernel("aten::linear_backward", &linearBackward);
  registerHostKernel("aten::_fused_rms_norm_backward", &fusedRmsNormBackward);
  registerHostKernel("aten::batch_norm_stats", &batchNormStats);
  registerHostKernel("aten::batch_norm_elemt", &batchNormElemt);
  registerHostKernel("aten::batch_norm_elemt.out", &batchNormElemtOut);
  registerHostKernel("aten::batch_norm_gather_stats_with_counts", &batchNormGatherStats);
  registerHostKernel("aten::batch_norm_backward_reduce", &batchNormBackwardReduce);
  registerHostKernel("aten::batch_norm_backward_elemt", &batchNormBackwardElemt);
  return true;
}();

// rms_norm as the device registers it, on PrivateUse1 and AutogradPrivateUse1:
// float16/bfloat16 input and weight computed in float32 when their dtypes
// differ, through _fused_rms_norm (whose PyTorch formula gives the backward,
// _fused_rms_norm_backward), and the result in the input's dtype.
at::Tensor rmsNorm(const at::Tensor& input, c10::IntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,
                   std::optional<double> eps) {
  static OpEntry& tracked = kernelEntry("aten::rms_norm", "");
  recordKernelRun(tracked);
  at::Tensor x = input;
  std::optional<at::Tensor> w = weight;
  const bool reduced = x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16;
  if (reduced && w && w->defined() && w->scalar_type() != x.scalar_type()) {
    x = x.to(at::kFloat);
    w = w->to(at::kFloat);
  }
  return std::get<0>(at::_fused_rms_norm(x, normalized_shape, w, eps)).to(input.scalar_type());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("rms_norm", rmsNorm); }
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { m.impl("rms_norm", rmsNorm); }

}  // namespace neuron_sim
