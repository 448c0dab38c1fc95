// The device's own argument checks for native ops whose errors differ from
// the CPU kernel's (exception type or words), and its dtype leniencies. Each
// check runs before the op's kernel, after the input-device check, and its
// error propagates as raised, as the device's preprocessing errors do
// (docs/semantics.md, "Differences from the CPU").
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/_log_softmax.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/_softmax.h>
#include <torch/library.h>

#include "aten/execution/execution.h"
#include "aten/execution/fallback_policy.h"
#include "aten/execution/op_table.h"
#include "aten/execution/tensor_alias.h"
#include "aten/neuron.h"

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

// mm(self, mat2[, out]): the shape checks of the device's traced kernel (PyTorch's meta
// function), in its words. A failing implementation: a RuntimeError, or the
// fallback-disabled error under TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1.
void mmShapes(const c10::OperatorHandle& op, const Stack& s) {
  const at::Tensor& a = arg(op, s, 0).toTensor();
  const at::Tensor& b = arg(op, s, 1).toTensor();
  if (a.dim() != 2) raiseImplementationError(op.schema().name(), "a must be 2D");
  if (b.dim() != 2) raiseImplementationError(op.schema().name(), "b must be 2D");
  if (a.size(1) != b.size(0))
    raiseImplementationError(op.schema().name(), c10::str("a and b must have same reduction dim, but got [",
                                                          a.size(0), ", ", a.size(1), "] X [", b.size(0), ", ",
                                                          b.size(1), "]."));
}

// index.Tensor(self, indices[]): an integer index out of bounds is the
// device's RuntimeError (its index implementation fails; the CPU raises IndexError).
void indexBounds(const c10::OperatorHandle& op, const Stack& s) {
  const at::Tensor& self = arg(op, s, 0).toTensor();
  const auto indices = arg(op, s, 1).toOptionalTensorList();
  int64_t dim = 0;
  for (const std::optional<at::Tensor> index : indices) {
    if (!index || !index->defined()) {
      ++dim;
      continue;
    }
    if (index->scalar_type() == at::kBool || index->scalar_type() == at::kByte) {
      dim += index->dim();  // a mask: the device runs nonzero first
      continue;
    }
    if (dim >= self.dim() || index->numel() == 0) break;
    const int64_t size = self.size(dim);
    const at::Tensor values = index->device().type() == kNeuron ? hostAlias(*index) : *index;
    const at::Tensor bad = values.lt(-size).logical_or(values.ge(size));
    if (bad.any().item<bool>())
      raiseImplementationError(op.schema().name() + ".Tensor",
                               c10::str("index ", values.masked_select(bad)[0].item<int64_t>(),
                                        " is out of bounds for dimension ", dim, " with size ", size));
    ++dim;
  }
}

// add.out(self, other, *, alpha, out): the device's kernels write contiguous
// outputs only, so its kernel fails on a non-contiguous out= tensor, and the
// CPU fallback that follows cannot write its result into one either.
// The refusal is add.out's alone, as observed on the device: other out= ops
// write through the tensor's strides as on the CPU. PyTorch's own composites
// pass such tensors (deg2rad of a transposed tensor calls mul.out into
// empty_like(self), fft.ihfftn's backward, in-place ops reaching their out=
// variant with out=self), so refusing them for every op, native or fallback,
// would fail programs the device runs.
void addOut(const c10::OperatorHandle& op, const Stack& s) {
  const at::Tensor& out = arg(op, s, 3).toTensor();
  if (out.is_contiguous()) return;
  TORCH_CHECK(!fallbackOnlyForUnimplemented(), "CPU fallback disabled because "
              "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1. Operation aten::add.out failed to execute on "
              "Neuron (last implementation: EmulatorKernel). Details: EmulatorKernel: Cannot process non-contiguous "
              "tensors. Unset the variable (or set it to 0) to let failing ops fall back to CPU.");
  TORCH_CHECK(false, "CPU fallback failed. Cannot copy result to output tensor which is not contiguous");
}

// _native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
//   proj_weight, proj_bias, mask?, need_weights, average_attn_weights, mask_type?)
// In the device's order: the head split, a mask, per-head weights, then a
// warning for a sequence length its flash kernel cannot take (the call goes
// on); returning the weights is refused after the output is computed, which
// for the caller is the same error.
void nativeMultiHeadAttention(const c10::OperatorHandle& op, const Stack& s) {
  const int64_t embed_dim = arg(op, s, 3).toInt(), num_head = arg(op, s, 4).toInt();
  TORCH_CHECK_VALUE(num_head > 0 && embed_dim % num_head == 0, "embed_dim (", embed_dim,
                    ") must be divisible by num_head (", num_head, ")");
  const c10::IValue& mask = arg(op, s, 9);
  TORCH_CHECK_NOT_IMPLEMENTED(mask.isNone() || !mask.toTensor().defined(),
                              "Arbitrary mask tensors not yet supported in Neuron implementation. Please use "
                              "mask_type=1 for causal masking or mask=None.");
  const bool need_weights = arg(op, s, 10).toBool(), average = arg(op, s, 11).toBool();
  TORCH_CHECK_NOT_IMPLEMENTED(!need_weights || average,
                              "Returning per-head attention weights not yet supported in Neuron implementation. "
                              "Please use average_attn_weights=True or need_weights=False.");
  const at::Tensor& query = arg(op, s, 0).toTensor();
  const int64_t seq_len = query.dim() > 1 ? query.size(1) : 0;
  if (seq_len % 512 != 0)
    TORCH_WARN("Sequence length ", seq_len, " is not a multiple of 512. Falling back to XLA/MLIR implementation "
               "instead of flash attention for better compatibility.");
  TORCH_CHECK_NOT_IMPLEMENTED(!need_weights,
                              "Returning attention weights (need_weights=True) is not yet supported in Neuron "
                              "implementation. Please use need_weights=False.");
}

// _native_multi_head_attention without weights asked for: the device returns an
// empty weights tensor where PyTorch's kernel returns none.
void nativeMultiHeadAttentionKernel(const c10::OperatorHandle& op, Stack* stack) {
  const at::Tensor query = (*stack)[stack->size() - op.schema().arguments().size()].toTensor();
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  c10::IValue& weights = stack->back();
  if (weights.isNone() || !weights.toTensor().defined()) weights = at::empty({0}, query.options());
}

// index_copy / index_copy_ / index_copy.out (self, dim, index, source[, out]): the device
// writes the source into the indexed slices with broadcasting, so a source that broadcasts
// to their shape (self's, with index.numel() along dim) is accepted - a row for every index,
// a 0-dim value for several - where the CPU kernel wants that exact shape. The source is
// expanded to it; the CPU kernel does the rest (and words any other error).
void indexCopyKernel(const c10::OperatorHandle& op, Stack* stack) {
  const size_t first = stack->size() - op.schema().arguments().size();
  const at::Tensor self = (*stack)[first].toTensor(), index = (*stack)[first + 2].toTensor();
  c10::IValue& source = (*stack)[first + 3];
  const at::Tensor src = source.toTensor();
  if (self.dim() > 0 && index.dim() <= 1) {
    const int64_t dim = c10::maybe_wrap_dim((*stack)[first + 1].toInt(), self.dim());
    std::vector<int64_t> slices(self.sizes().begin(), self.sizes().end());
    slices[dim] = index.numel();
    if (!src.sizes().equals(slices) && at::is_expandable_to(src.sizes(), slices)) source = src.expand(slices);
  }
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
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

// _foreach_{add,sub,mul,div}[_].ScalarList(self[], scalars[]): a ValueError when the
// lengths differ, as the device's Python layer raises it (the CPU kernel: RuntimeError).
void foreachScalarList(const c10::OperatorHandle& op, const Stack& s) {
  const size_t tensors = arg(op, s, 0).toListRef().size(), scalars = arg(op, s, 1).toListRef().size();
  TORCH_CHECK_VALUE(tensors == scalars, "Tensor list must have same number of elements as scalar list");
}

// Backward ops with an output_mask argument: the device returns nothing
// (None) for a gradient the mask does not ask for. The CPU kernel of
// convolution_backward computes the weight gradient with the bias gradient
// whatever the mask says; the device's does not.
void maskedGradientsKernel(const c10::OperatorHandle& op, Stack* stack) {
  const std::vector<bool> mask = stack->back().toBoolList().vec();  // output_mask: the last argument
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  const size_t nret = op.schema().returns().size();
  for (size_t i = 0; i < nret && i < mask.size(); ++i)
    if (!mask[i]) (*stack)[stack->size() - nret + i] = at::Tensor();
}

// randperm.out(n, *, out) / randperm.generator_out(n, *, generator, out): the
// device's fallback resizes a wrongly sized out= tensor to n as the CPU kernel
// does (without a warning), then runs the op as any fallback.
void randpermOutKernel(const c10::OperatorHandle& op, c10::DispatchKeySet, Stack* stack) {
  const int64_t n = arg(op, *stack, 0).toInt();
  at::Tensor out = stack->back().toTensor();
  if (n >= 0 && out.device().type() == kNeuron && !(out.dim() == 1 && out.size(0) == n)) out.resize_({n});
  runBoxed(op, stack);
}

// _embedding_bag / _embedding_bag_forward_only (weight, indices, offsets, scale_grad_by_freq,
// mode, sparse, per_sample_weights?, ...): per-sample weights of another dtype than the
// embeddings are refused in the device's words (the CPU: "... to have the same type as ...").
void embeddingBagKernel(const c10::OperatorHandle& op, c10::DispatchKeySet, Stack* stack) {
  const at::Tensor& weight = arg(op, *stack, 0).toTensor();
  const c10::IValue& psw = arg(op, *stack, 6);
  if (weight.device().type() == kNeuron && psw.isTensor() && psw.toTensor().defined())
    TORCH_CHECK(psw.toTensor().scalar_type() == weight.scalar_type(), "expected scalar type ",
                weight.scalar_type(), " but found ", psw.toTensor().scalar_type());
  runBoxed(op, stack);
}

const bool kPreconditionsRegistered = [] {
  registerPrecondition("aten::index_select", &indexSelect);
  registerPrecondition("aten::index_select.out", &indexSelect);
  registerPrecondition("aten::index_select_backward", &indexSelectBackward);
  registerPrecondition("aten::one_hot", &oneHot);
  registerPrecondition("aten::amax.out", &reductionOut);
  registerPrecondition("aten::amin.out", &reductionOut);
  registerPrecondition("aten::nonzero.out", &nonzeroOut);
  registerPrecondition("aten::histc.out", &histcOut);
  registerPrecondition("aten::_native_multi_head_attention", &nativeMultiHeadAttention);
  registerPrecondition("aten::add.out", &addOut);
  registerPrecondition("aten::mm", &mmShapes);
  registerPrecondition("aten::mm.out", &mmShapes);
  registerPrecondition("aten::index.Tensor", &indexBounds);
  registerHostKernel("aten::_native_multi_head_attention", &nativeMultiHeadAttentionKernel);
  registerHostKernel("aten::index_copy", &indexCopyKernel);
  registerHostKernel("aten::index_copy_", &indexCopyKernel);
  registerHostKernel("aten::index_copy.out", &indexCopyKernel);
  registerHostKernel("aten::_softmax", &softmaxKernel<false>);
  registerHostKernel("aten::_log_softmax", &softmaxKernel<true>);
  registerHostKernel("aten::convolution_backward", &maskedGradientsKernel);
  for (const char* op : {"add", "sub", "mul", "div"}) {
    registerPrecondition(c10::str("aten::_foreach_", op, ".ScalarList"), &foreachScalarList);
    registerPrecondition(c10::str("aten::_foreach_", op, "_.ScalarList"), &foreachScalarList);
  }
  return true;
}();

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("randperm.out", torch::CppFunction::makeFromBoxedFunction<&randpermOutKernel>());
  m.impl("randperm.generator_out", torch::CppFunction::makeFromBoxedFunction<&randpermOutKernel>());
  m.impl("_embedding_bag", torch::CppFunction::makeFromBoxedFunction<&embeddingBagKernel>());
  m.impl("_embedding_bag_forward_only", torch::CppFunction::makeFromBoxedFunction<&embeddingBagKernel>());
}

}  // namespace
}  // namespace neuron_sim
