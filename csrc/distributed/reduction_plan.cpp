#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/reduction_plan.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/view_as_real.h>

#include "aten/execution/numerics.h"
#include "aten/execution/tensor_alias.h"

namespace neuron_sim::distributed {
namespace {

using c10d::ReduceOp;

// Dtypes gloo reduces itself.
bool glooReduces(at::ScalarType s) {
  switch (s) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16:
    case at::kChar: case at::kByte: case at::kInt: case at::kLong: case at::kBool:
      return true;
    default:
      return false;
  }
}

const char* opName(ReduceOp::RedOpType op) {
  switch (op) {
    case ReduceOp::SUM: return "SUM";
    case ReduceOp::AVG: return "AVG";
    case ReduceOp::PRODUCT: return "PRODUCT";
    case ReduceOp::MIN: return "MIN";
    case ReduceOp::MAX: return "MAX";
    case ReduceOp::BAND: return "BAND";
    case ReduceOp::BOR: return "BOR";
    case ReduceOp::BXOR: return "BXOR";
    case ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

}  // namespace

// A wider dtype whose result narrows back exactly: integer arithmetic wraps
// the same way; every float8 value is exact in float32.
std::optional<at::ScalarType> reduceDtype(at::ScalarType s) {
  if (glooReduces(s)) return s;
  switch (s) {
    case at::kShort: case at::kUInt16: return at::kInt;
    case at::kUInt32: case at::kUInt64: return at::kLong;
    case at::kFloat8_e5m2: case at::kFloat8_e4m3fn: case at::kFloat8_e5m2fnuz: case at::kFloat8_e4m3fnuz:
      return at::kFloat;
    case at::kComplexFloat: return at::kFloat;   // reduced as view_as_real
    case at::kComplexDouble: return at::kDouble;
    default: return std::nullopt;
  }
}

std::string planReduction(const ReduceOp& op, at::ScalarType dtype, Reduction& r) {
  r = Reduction{op};
  bool complex = at::isComplexType(dtype);
  bool integral = at::isIntegralType(dtype, /*includeBool=*/true);
  switch (op.op_) {
    case ReduceOp::SUM: break;
    case ReduceOp::AVG:
      r.gloo_op = ReduceOp(ReduceOp::SUM);
      r.average = true;
      break;
    case ReduceOp::PREMUL_SUM: {
      r.gloo_op = ReduceOp(ReduceOp::SUM);
      r.premul = true;
      auto* sup = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
      if (!sup) return "ReduceOp.PREMUL_SUM came without its factor";
      r.factor = sup->tensor_factor.defined() ? sup->tensor_factor.to(at::kCPU).item<double>() : sup->double_factor;
      if (integral) return "ReduceOp.PREMUL_SUM needs a floating-point tensor";
      break;
    }
    case ReduceOp::PRODUCT: case ReduceOp::MIN: case ReduceOp::MAX:
      if (complex) return std::string("ReduceOp.") + opName(op.op_) + " is not defined for complex tensors";
      break;
    case ReduceOp::BAND: case ReduceOp::BOR: case ReduceOp::BXOR:
      if (!integral)
        return std::string("ReduceOp.") + opName(op.op_) + " needs an integer or bool tensor, got " +
               c10::toString(dtype);
      break;
    default:
      return "unsupported reduce op";
  }
  if (!reduceDtype(dtype)) return std::string("reductions of dtype ") + c10::toString(dtype) + " are not supported";
  r.in_float = r.gloo_op.op_ == ReduceOp::SUM && !complex && reducesInFloat(dtype);
  return "";
}

at::Tensor reducible(const at::Tensor& t, const Reduction& r, Staging& s, bool copy_in, bool write_back,
                     const char* op) {
  at::ScalarType work = r.in_float ? at::kFloat : *reduceDtype(t.scalar_type());
  bool complex = at::isComplexType(t.scalar_type());
  at::Tensor buf;
  if (t.is_contiguous() && (work == t.scalar_type() || complex) && !r.premul) {
    buf = hostAlias(t);
  } else {
    at::ScalarType staged = complex ? t.scalar_type() : work;
    at::Tensor tmp = at::empty(t.sizes(), t.options().dtype(staged).memory_format(at::MemoryFormat::Contiguous));
    buf = hostAlias(tmp);
    if (copy_in) buf.copy_(hostAlias(t));
    s.keep.push_back(tmp);
    if (write_back) {
      at::Tensor dst = hostAlias(t);
      at::Tensor src = buf;
      const bool in_float = r.in_float;
      s.steps.push_back([src, dst, in_float, op]() mutable {
        if (in_float) storeReduced(src, dst, op);
        else dst.copy_(src);
      });
    }
  }
  if (complex) buf = at::view_as_real(buf);
  if (r.premul) buf.mul_(r.factor);
  return buf;
}

void divideBy(at::Tensor& t, int size) {
  if (at::isIntegralType(t.scalar_type(), /*includeBool=*/true))
    t.div_(size, "trunc");
  else
    t.div_(size);
}

void averageFirst(const at::Tensor& buf, int size, Staging& s) {
  at::Tensor b = buf;
  s.steps.insert(s.steps.begin(), [b, size]() mutable { divideBy(b, size); });
}

}  // namespace neuron_sim::distributed
