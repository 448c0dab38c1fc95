#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "aten/execution/dtype_widening.h"

#include <c10/util/SmallVector.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "aten/execution/call_facts.h"

namespace neuron_sim {
namespace {

// The dtypes the device computes in (its type converters: docs/semantics.md).
bool deviceDtype(at::ScalarType s) {
  switch (s) {
    case at::kFloat: case at::kHalf: case at::kBFloat16: case at::kChar: case at::kShort: case at::kInt:
    case at::kLong: case at::kByte: case at::kBool:
      return true;
    default:
      return false;
  }
}

// Wider dtypes to try, in order. Integers first try int64, which keeps
// integer semantics (wrap-around, integer division); then float64, exact for
// every 32-bit integer. Floats widen to float32, then float64.
c10::SmallVector<at::ScalarType, 2> widerThan(at::ScalarType s) {
  switch (s) {
    case at::kHalf: case at::kBFloat16: return {at::kFloat, at::kDouble};
    case at::kFloat: return {at::kDouble};
    case at::kLong: return {at::kDouble};
    default: return {at::kLong, at::kDouble};  // bool and the 8/16/32-bit integers
  }
}

// The ops the device computes in a dtype their CPU kernel lacks; only these
// are widened. Elsewhere nothing says the device accepts the dtype and every
// PyTorch kernel refuses it (CPU and CUDA alike: gelu, silu, softmax,
// layer_norm, transposed conv, lerp, nll_loss on integers; mm, pow, ceil on bool), so
// script code cannot rely on it and the CPU's error is the device's.
uint64_t deviceComputes(const OpEntry& e) {
  static const uint64_t kIntegers = dtypeBit(at::kChar) | dtypeBit(at::kShort) | dtypeBit(at::kInt) |
                                    dtypeBit(at::kLong) | dtypeBit(at::kByte);
  // histc: TorchNeuron's has no input-dtype check and counts in the input's
  // integer dtype (CUDA's kernel has integers too; Hugging Face's MoE routing
  // relies on it off the CPU). Not bool: neither CUDA's kernel nor the device
  // is known to count booleans.
  if (e.base == "aten::histc") return kIntegers;
  // abs of a bool is itself: CUDA's kernel has bool, and the device's abs
  // returns unsigned inputs unchanged.
  if (e.base == "aten::abs") return dtypeBit(at::kBool);
  return 0;
}

// cpuErrorDtypes(): taken only on the error path.
std::mutex cpu_error_mu;
std::map<std::string, uint64_t>& cpuErrors() {
  static std::map<std::string, uint64_t> m;
  return m;
}

bool sameTensor(const at::Tensor& a, const at::Tensor& b) { return a.unsafeGetTensorImpl() == b.unsafeGetTensorImpl(); }

struct Widening {
  at::ScalarType from, to;
  // (host alias the op writes, wide stand-in the kernel wrote instead)
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 2> written;

  at::Tensor widenTensor(const at::Tensor& t, bool writes) {
    if (!t.defined()) return t;
    if (t.scalar_type() != from) return t;
    at::Tensor wide = t.to(to);
    if (writes) written.emplace_back(t, wide);
    return wide;
  }

  c10::IValue widen(const c10::IValue& v, bool writes, bool is_dtype) {
    if (v.isTensor()) return widenTensor(v.toTensor(), writes);
    if (is_dtype && v.isInt() && v.toInt() == static_cast<int64_t>(from)) return static_cast<int64_t>(to);
    if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) out.push_back(widenTensor(t, writes));
      return out;
    }
    if (v.isList()) {  // Tensor?[] (index)
      c10::List<c10::IValue> copy = v.toList().copy();
      for (size_t i = 0; i < copy.size(); ++i) {
        c10::IValue x = copy.get(i);
        if (x.isTensor()) copy.set(i, widenTensor(x.toTensor(), writes));
      }
      return copy;
    }
    return v;
  }

  at::Tensor narrowResult(const at::Tensor& r) const {
    if (!r.defined()) return r;
    for (const auto& [alias, wide] : written)
      if (sameTensor(r, wide)) return alias;
    if (r.scalar_type() == to) return r.to(from);
    return r;
  }

  c10::IValue narrow(const c10::IValue& v) const {
    if (v.isTensor()) return narrowResult(v.toTensor());
    if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) out.push_back(narrowResult(t));
      return out;
    }
    return v;
  }
};

}  // namespace

std::optional<at::ScalarType> widenableDtype(const c10::NotImplementedError& err) {
  // AT_DISPATCH's message: "<kernel>" not implemented for '<ScalarType>'
  static const char kMarker[] = "\" not implemented for '";
  const std::string& msg = err.msg();
  const size_t at = msg.find(kMarker);
  if (at == std::string::npos) return std::nullopt;
  const size_t begin = at + sizeof(kMarker) - 1;
  const size_t end = msg.find('\'', begin);
  if (end == std::string::npos) return std::nullopt;
  const std::string name = msg.substr(begin, end - begin);
  for (at::ScalarType s : {at::kFloat, at::kHalf, at::kBFloat16, at::kChar, at::kShort, at::kInt, at::kLong,
                           at::kByte, at::kBool})
    if (name == c10::toString(s)) return deviceDtype(s) ? std::optional<at::ScalarType>(s) : std::nullopt;
  return std::nullopt;
}

bool runWidened(const c10::OperatorHandle& op, OpEntry& e, torch::jit::Stack* stack, c10::ArrayRef<c10::IValue> args,
                at::ScalarType from) {
  const size_t nargs = args.size();
  const auto& schema = op.schema().arguments();
  // A wide dtype some argument already has (an int64 index next to int32
  // values) would make results ambiguous: which to cast back? Skip it.
  auto present = [&](at::ScalarType s) {
    for (const c10::IValue& v : args) {
      if (v.isTensor() && v.toTensor().defined() && v.toTensor().scalar_type() == s) return true;
      if (v.isList())
        for (const c10::IValue& x : v.toListRef())
          if (x.isTensor() && x.toTensor().defined() && x.toTensor().scalar_type() == s) return true;
    }
    return false;
  };
  for (at::ScalarType to : widerThan(from)) {
    if (present(to)) continue;
    Widening w{from, to};
    torch::jit::Stack call;
    call.reserve(nargs);
    for (size_t i = 0; i < nargs; ++i) {
      const bool writes = schema[i].alias_info() && schema[i].alias_info()->isWrite();
      const bool is_dtype = i < 64 && (e.dtype_arg_mask >> i) & 1;
      call.push_back(w.widen(args[i], writes, is_dtype));
    }
    try {
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &call);
    } catch (const c10::NotImplementedError& err) {
      auto again = widenableDtype(err);
      if (again && (*again == to || *again == from)) continue;  // the wider dtype has no kernel either
      throw;
    }
    // In-place and out= arguments: the stand-in's values go back into the
    // caller's tensor, in its own dtype (resized first if the kernel resized).
    for (const auto& [alias, wide] : w.written) {
      at::Tensor target = alias;
      if (!target.sizes().equals(wide.sizes())) target.resize_(wide.sizes());
      target.copy_(wide);
    }
    const size_t nret = op.schema().returns().size();
    for (size_t i = call.size() - nret; i < call.size(); ++i) stack->push_back(w.narrow(call[i]));
    e.widened.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  return false;
}

std::vector<std::pair<std::string, uint64_t>> cpuErrorDtypes() {
  std::lock_guard<std::mutex> lock(cpu_error_mu);
  return {cpuErrors().begin(), cpuErrors().end()};
}

void runCpuKernel(const c10::OperatorHandle& op, OpEntry& e, torch::jit::Stack* stack, uint64_t bits) {
  const size_t first = stack->size() - op.schema().arguments().size();
  // The hot path: dtypes this op's CPU kernel already ran in. The decision is
  // made once per (op, dtype); only a first call keeps its arguments.
  if (C10_LIKELY((bits & ~e.kernel_dtypes_checked.load(std::memory_order_relaxed)) == 0)) {
    const uint64_t wide = bits & e.widen_dtypes.load(std::memory_order_relaxed);
    if (C10_LIKELY(wide == 0)) {
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
      return;
    }
    c10::SmallVector<c10::IValue, 8> args(stack->begin() + first, stack->end());
    stack->resize(first);
    if (runWidened(op, e, stack, args, static_cast<at::ScalarType>(__builtin_ctzll(wide)))) return;
    stack->insert(stack->end(), args.begin(), args.end());  // no wider kernel for these arguments: the CPU's error
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    return;
  }
  // First call in these dtypes. Kept for a retry: a boxed kernel that throws
  // may have moved arguments out.
  c10::SmallVector<c10::IValue, 8> args(stack->begin() + first, stack->end());
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  } catch (const c10::NotImplementedError& err) {
    const auto from = widenableDtype(err);
    if (!from) throw;
    if (!(deviceComputes(e) & dtypeBit(*from))) {
      std::lock_guard<std::mutex> lock(cpu_error_mu);
      cpuErrors()[e.name] |= dtypeBit(*from);
      throw;
    }
    stack->resize(first);
    if (!runWidened(op, e, stack, args, *from)) throw;
    e.widen_dtypes.fetch_or(dtypeBit(*from), std::memory_order_relaxed);
  }
  e.kernel_dtypes_checked.fetch_or(bits, std::memory_order_relaxed);
}

}  // namespace neuron_sim
