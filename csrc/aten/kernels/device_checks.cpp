// The device's own argument checks for native ops whose errors differ from
// the CPU kernel's (exception type or words), and its dtype leniencies. Each
// check runs before the op's kernel, after the input-device check, and its
// error propagates as raised, as the device's preprocessing errors do
// (docs/semantics.md, "Differences from the CPU").
#include <ATen/ops/_log_softmax.h>
#include <ATen/ops/_softmax.h>
#include <torch/library.h>

#include "aten/execution/op_table.h"

namespace neuron_sim {
namespace {

using torch::jit::Stack;

// The argument `i` of the op on top of the stack.
const c10::IValue& arg(const c10::OperatorHandle& op, const Stack& s, size_t i) {
  return s[s.size() - op.schema().arguments().size() + i];
}

// "torch.float32", as the device's Python layer prints dtypes.
std::string pyDtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    case at::kShort: return "torch.int16";
    case at::kChar: return "torch.int8";
    case at::kByte: return "torch.uint8";
    case at::kBool: return "torch.bool";
    case at::kComplexFloat: return "torch.complex64";
    case at::kComplexDouble: return "torch.complex128";
    default: return std::string("torch.") + c10::toString(t);
  }
}

bool isIndexType(at::ScalarType t) { return t == at::kInt || t == at::kLong; }

// index_select(self, dim, index[, out]): a TypeError for a non-integer index.
void indexSelect(const c10::OperatorHandle& op, const Stack& s) {
  const at::Tensor& index = arg(op, s, 2).toTensor();
  TORCH_CHECK_TYPE(isIndexType(index.scalar_type()), "index_select(): Expected dtype int32 or int64 for index");
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
}

// index_select_backward(grad, self_sizes, dim, index)
void indexSelectBackward(const c10::OperatorHandle& op, const Stack& s) {
  const at::Tensor& index = arg(op, s, 3).toTensor();
  TORCH_CHECK_TYPE(isIndexType(index.scalar_type()),
                   "index_select_backward(): Expected dtype int32/int64 for index but got: ",
                   pyDtype(index.scalar_type()));
}

// one_hot(self, num_classes): int64 indices only, in the device's words.
void oneHot(const c10::OperatorHandle& op, const Stack& s) {
  const at::Tensor& self = arg(op, s, 0).toTensor();
  TORCH_CHECK(self.scalar_type() == at::kLong,
              "one_hot is only applicable to index tensor of dtype int64, got ", pyDtype(self.scalar_type()));
}

// amax.out / amin.out (self, dim, keepdim, *, out): a TypeError on a dtype mismatch.
void reductionOut(const c10::OperatorHandle& op, const Stack& s) {
  const at::Tensor& self = arg(op, s, 0).toTensor();
  const at::Tensor& out = arg(op, s, 3).toTensor();
  TORCH_CHECK_TYPE(self.scalar_type() == out.scalar_type(), "Expected the dtype for input and out to match, but got ",
                   pyDtype(self.scalar_type()), " for input's dtype and ", pyDtype(out.scalar_type()),
                   " for out's dtype.");
}

// nonzero.out(self, *, out): the device's message (it lacks a space).
void nonzeroOut(const c10::OperatorHandle& op, const Stack& s) {
  const at::Tensor& out = arg(op, s, 1).toTensor();
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero: Expected out tensor to have scalar type Long but got scalar type",
              out.scalar_type());
}

// histc.out(self, bins, min, max, *, out)
void histcOut(const c10::OperatorHandle& op, const Stack& s) {
  const at::Tensor& self = arg(op, s, 0).toTensor();
  const at::Tensor& out = arg(op, s, 4).toTensor();
  TORCH_CHECK(self.scalar_type() == out.scalar_type(),
              "torch.histogram: input tensor and hist tensor should have the same dtype, but got input ",
              pyDtype(self.scalar_type()), " and hist ", pyDtype(out.scalar_type()));
}

// _native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
//   proj_weight, proj_bias, mask?, need_weights, average_attn_weights, mask_type?)
void nativeMultiHeadAttention(const c10::OperatorHandle& op, const Stack& s) {
  const c10::IValue& mask = arg(op, s, 9);
  TORCH_CHECK_NOT_IMPLEMENTED(mask.isNone() || !mask.toTensor().defined(),
                              "Arbitrary mask tensors not yet supported in Neuron implementation. Please use "
                              "mask_type=1 for causal masking or mask=None.");
  const bool need_weights = arg(op, s, 10).toBool(), average = arg(op, s, 11).toBool();
  TORCH_CHECK_NOT_IMPLEMENTED(!need_weights || average,
                              "Returning per-head attention weights (average_attn_weights=False) is not yet "
                              "supported in Neuron implementation. Please use need_weights=False.");
  TORCH_CHECK_NOT_IMPLEMENTED(!need_weights,
                              "Returning attention weights (need_weights=True) is not yet supported in Neuron "
                              "implementation. Please use need_weights=False.");
}

// _softmax / _log_softmax (self, dim, half_to_float): the device computes a
// float16 input in float32 when asked, where the CPU kernel refuses.
template <bool Log>
void softmaxKernel(const c10::OperatorHandle& op, Stack* stack) {
  const auto a = torch::jit::last(*stack, 3);
  const bool half_to_float = a[2].toBool();
  if (!half_to_float || a[0].toTensor().scalar_type() != at::kHalf)
    return op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  const at::Tensor x = a[0].toTensor().to(at::kFloat);
  const int64_t dim = a[1].toInt();
  torch::jit::drop(*stack, 3);
  torch::jit::push(*stack, Log ? at::_log_softmax(x, dim, false) : at::_softmax(x, dim, false));
}

const bool kRegistered = [] {
  registerPrecondition("aten::index_select", &indexSelect);
  registerPrecondition("aten::index_select.out", &indexSelect);
  registerPrecondition("aten::index_select_backward", &indexSelectBackward);
  registerPrecondition("aten::one_hot", &oneHot);
  registerPrecondition("aten::amax.out", &reductionOut);
  registerPrecondition("aten::amin.out", &reductionOut);
  registerPrecondition("aten::nonzero.out", &nonzeroOut);
  registerPrecondition("aten::histc.out", &histcOut);
  registerPrecondition("aten::_native_multi_head_attention", &nativeMultiHeadAttention);
  registerHostKernel("aten::_softmax", &softmaxKernel<false>);
  registerHostKernel("aten::_log_softmax", &softmaxKernel<true>);
  return true;
}();

}  // namespace
}  // namespace neuron_sim
