#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "aten/execution/dtype_policy.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>

namespace neuron_sim {
namespace {

std::atomic<DtypePolicy> g_policy{DtypePolicy::kTrainium};
std::atomic<uint64_t> g_host_casts64{0};

bool wide(const at::Tensor& t) {
  // The real policy leaves 0-dim tensors at full width (Python scalars arrive as 0-dim tensors).
  return t.defined() && t.dim() != 0 && isWide(t.scalar_type());
}

// int64 values as int32 arithmetic leaves them: wrapped to 32 bits.
at::Tensor wrap32(const at::Tensor& t) { return t.to(at::kInt).to(at::kLong); }

// Whether every value of an int64 host tensor is already an int32 one, which
// wrapping leaves unchanged (class targets, indices): one read of the values
// instead of two conversions, each an allocation and a copy kernel, on every
// nll_loss of a training step. Only contiguous host views are read; any other
// layout answers false and takes the conversions.
bool int32Valued(const at::Tensor& t) {
  if (!t.device().is_cpu() || !t.is_contiguous()) return false;
  const int64_t* v = t.const_data_ptr<int64_t>();
  for (int64_t i = 0, n = t.numel(); i < n; ++i)
    if (v[i] != static_cast<int32_t>(v[i])) return false;
  return true;
}

// A written view that is not dense (it may share memory between elements: an
// expanded or as_strided view) gets a stand-in with the same geometry over a
// 32-bit copy of the memory it spans: the kernel then meets the overlap the
// CPU would (fill_ writes an expanded view, add_ refuses it, an in-place op
// over rows that overlap reads its own writes). A contiguous copy would turn
// one memory location into several elements, which copy_ cannot write back.
at::Tensor sameGeometry(const at::Tensor& t) {
  int64_t extent = 1;
  for (int64_t d = 0; d < t.dim(); ++d) extent += (t.size(d) - 1) * t.stride(d);
  const at::Tensor span = t.as_strided({extent}, {1}, t.storage_offset());
  const at::Tensor narrow = t.scalar_type() == at::kDouble ? span.to(at::kFloat) : wrap32(span);
  return narrow.as_strided(t.sizes(), t.strides(), 0);
}

// An argument the op writes gets a copy even when its values fit: the kernel
// must not write the caller's tensor before widenResults copies back.
at::Tensor standIn(const at::Tensor& t, Narrowed& n, OpEntry& e, bool written) {
  const bool shared = written && t.numel() > 0 && at::has_internal_overlap(t) != at::MemOverlap::No;
  if (t.scalar_type() == at::kDouble) {
    n.f64 = true;
    e.downcasts_f64.fetch_add(1, std::memory_order_relaxed);
    return shared ? sameGeometry(t) : t.to(at::kFloat);
  }
  n.i64 = true;
  e.downcasts_i64.fetch_add(1, std::memory_order_relaxed);
  if (shared) return sameGeometry(t);
  return !written && int32Valued(t) ? t : wrap32(t);
}

bool anyWide(const c10::IValue& v) {
  if (v.isTensor()) return wide(v.toTensor());
  if (v.isList())
    for (const c10::IValue& x : v.toListRef())
      if (x.isTensor() && wide(x.toTensor())) return true;
  return false;
}

}  // namespace

void readDtypeFacts(OpEntry& e, const c10::FunctionSchema& schema) {
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& type = args[i].type();
    auto opt = type->cast<c10::OptionalType>();
    auto inner = opt ? opt->getElementType() : type;
    // ScalarType arguments are ints to the interpreter; their real type says dtype.
    const auto& real = args[i].real_type();
    auto real_opt = real->cast<c10::OptionalType>();
    const bool is_dtype = (real_opt ? real_opt->getElementType() : real)->kind() == c10::TypeKind::ScalarTypeType;
    if (is_dtype && i < 64) e.dtype_arg_mask |= uint64_t{1} << i;
    const bool list = inner->kind() == c10::TypeKind::ListType;
    const auto elem = list ? inner->castRaw<c10::ListType>()->getElementType() : inner;
    const auto elem_inner = elem->cast<c10::OptionalType>() ? elem->castRaw<c10::OptionalType>()->getElementType() : elem;
    if (elem_inner->kind() == c10::TypeKind::TensorType || is_dtype) e.may_downcast = true;
    if (args[i].alias_info() && args[i].alias_info()->isWrite() && i < 64) e.written_args |= uint64_t{1} << i;
  }
}

void noteHostCast64() { g_host_casts64.fetch_add(1, std::memory_order_relaxed); }
uint64_t hostCasts64() { return g_host_casts64.load(); }
void clearHostCasts64() { g_host_casts64 = 0; }

void setDtypePolicy(DtypePolicy policy) { g_policy = policy; }
DtypePolicy dtypePolicy() { return g_policy.load(std::memory_order_relaxed); }

void narrowArguments(OpEntry& e, torch::jit::Stack* stack, size_t first, size_t nargs, Narrowed& n) {
  for (size_t i = 0; i < nargs; ++i) {
    c10::IValue& v = (*stack)[first + i];
    const bool writes = i < 64 && (e.written_args >> i) & 1;
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (writes && t.defined()) n.writes.push_back(t.unsafeGetTensorImpl());
      if (!wide(t)) continue;
      at::Tensor s = standIn(t, n, e, writes);
      if (writes) n.written.emplace_back(t, s);
      v = s;
    } else if (v.isList() && anyWide(v)) {
      c10::List<c10::IValue> copy = v.toList().copy();
      for (size_t j = 0; j < copy.size(); ++j) {
        c10::IValue x = copy.get(j);
        if (!x.isTensor()) continue;
        const at::Tensor& t = x.toTensor();
        if (writes && t.defined()) n.writes.push_back(t.unsafeGetTensorImpl());
        if (!wide(t)) continue;
        at::Tensor s = standIn(t, n, e, writes);
        if (writes) n.written.emplace_back(t, s);
        copy.set(j, s);
      }
      v = copy;
    } else if (v.isList()) {
      if (writes)
        for (const c10::IValue& x : v.toListRef())
          if (x.isTensor() && x.toTensor().defined()) n.writes.push_back(x.toTensor().unsafeGetTensorImpl());
    }
  }
  for (uint64_t mask = e.dtype_arg_mask; mask; mask &= mask - 1) {
    c10::IValue& v = (*stack)[first + __builtin_ctzll(mask)];
    if (!v.isInt()) continue;
    if (v.toInt() == static_cast<int64_t>(at::kDouble)) {
      n.f64 = true;
      e.downcasts_f64.fetch_add(1, std::memory_order_relaxed);
      v = static_cast<int64_t>(at::kFloat);
    } else if (v.toInt() == static_cast<int64_t>(at::kLong)) {
      n.i64 = true;  // the int64 result is wrapped below
      e.downcasts_i64.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

namespace {

at::Tensor widen(const at::Tensor& r, const Narrowed& n) {
  if (!r.defined()) return r;
  for (const auto& [original, stand_in] : n.written)
    if (r.unsafeGetTensorImpl() == stand_in.unsafeGetTensorImpl()) return original;
  for (c10::TensorImpl* w : n.writes)
    if (r.unsafeGetTensorImpl() == w) return r;
  if (n.f64 && r.scalar_type() == at::kFloat) return r.to(at::kDouble);
  if (n.i64 && r.scalar_type() == at::kLong) return wrap32(r);
  return r;
}

}  // namespace

void widenResults(const Narrowed& n, torch::jit::Stack* stack, size_t nret) {
  for (const auto& [original, stand_in] : n.written) {
    at::Tensor target = original, source = stand_in;
    if (!target.sizes().equals(source.sizes())) target.resize_(source.sizes());
    // One element per memory location: a dimension both sides broadcast
    // (stride 0) holds one value, and copy_ refuses a destination that repeats one.
    for (int64_t d = 0; d < target.dim(); ++d)
      if (target.size(d) > 1 && target.stride(d) == 0 && source.stride(d) == 0) {
        target = target.narrow(d, 0, 1);
        source = source.narrow(d, 0, 1);
      }
    target.copy_(source.scalar_type() == at::kLong ? source.to(at::kInt) : source);
  }
  for (size_t i = stack->size() - nret; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      v = widen(v.toTensor(), n);
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      c10::List<at::Tensor> out;
      out.reserve(list.size());
      for (const at::Tensor& t : list) out.push_back(widen(t, n));
      v = out;
    }
  }
}

}  // namespace neuron_sim
