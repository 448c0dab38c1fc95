#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "aten/execution/numerics.h"

#include <ATen/ops/empty_like.h>
#include <c10/util/SmallVector.h>

#include <atomic>
#include <map>
#include <mutex>
#include <stdexcept>

#include "aten/execution/call_facts.h"
#include "aten/execution/dtype_policy.h"
#include "aten/execution/dtype_widening.h"
#include "aten/execution/fallback_policy.h"

namespace neuron_sim {
namespace {

namespace nx = runtime::numerics;

// Ops the compiler's --auto-cast matmult casts: the ones the Tensor Engine computes.
bool usesTensorEngine(const std::string& base) {
  static const char* const kOps[] = {"aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::addbmm",
                                     "aten::mv", "aten::addmv", "aten::dot", "aten::matmul", "aten::linear",
                                     "aten::convolution", "aten::_convolution", "aten::convolution_backward",
                                     "aten::conv1d", "aten::conv2d", "aten::conv3d"};
  for (const char* op : kOps)
    if (base == op) return true;
  return false;
}

// Integer ops the device computes in fp32 (exact only below 2^24).
bool integerInFloat(const std::string& base) {
  static const char* const kOps[] = {"aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::addbmm",
                                     "aten::mv", "aten::addmv", "aten::dot", "aten::matmul",
                                     "aten::scatter_add", "aten::scatter_add_", "aten::index_add", "aten::index_add_"};
  for (const char* op : kOps)
    if (base == op) return true;
  return false;
}

bool isInteger(at::ScalarType s) {
  return s == at::kByte || s == at::kChar || s == at::kShort || s == at::kInt || s == at::kLong;
}
bool isHalf(at::ScalarType s) { return s == at::kBFloat16 || s == at::kHalf; }
bool isStored8(at::ScalarType s) { return s == at::kFloat8_e4m3fn || s == at::kFloat8_e5m2; }

nx::Format formatOf(at::ScalarType s) {
  switch (s) {
    case at::kHalf: return nx::Format::kFloat16;
    case at::kFloat8_e4m3fn: return nx::Format::kFloat8E4M3;
    case at::kFloat8_e5m2: return nx::Format::kFloat8E5M2;
    default: return nx::Format::kBFloat16;
  }
}

constexpr double kExactInFloat = 16777216.0;  // 2^24: every integer below it is exact in fp32

// The rules, reading the environment at the first op. A malformed value is
// the device's error (the compiler's for NEURON_CC_FLAGS, a RuntimeError as a
// failed compilation; a ValueError for the seed); the next op reads again.
uint32_t activeRules() {
  uint32_t r = nx::rules();
  if (C10_LIKELY(!(r & nx::kUnread))) return r;
  try {
    return nx::readEnvironment();
  } catch (const std::invalid_argument& ex) {
    const std::string msg = ex.what();
    if (msg.rfind("neuronx-cc", 0) == 0) TORCH_CHECK(false, "Compilation failed: ", msg);
    TORCH_CHECK_VALUE(false, msg);
  }
}

// Rounds a fresh fp32 tensor in place (its own temporary: nobody else reads it).
void roundInPlace(at::Tensor& t, nx::Format f, bool stochastic) {
  if (!t.is_contiguous()) t = t.contiguous();
  float* p = t.data_ptr<float>();
  if (stochastic) nx::roundStochastic(p, p, t.numel(), f, nx::seed(), nx::nextStream());
  else nx::roundNearest(p, p, t.numel(), f);
}

// fp32 values stored as `to`: stochastically rounded first where the rule says.
at::Tensor storedAs(const at::Tensor& wide, at::ScalarType to, bool stochastic) {
  at::Tensor out = at::empty_like(wide, wide.options().dtype(to));
  if (stochastic && (isHalf(to) || isStored8(to))) {
    at::Tensor r = wide.contiguous().clone();
    roundInPlace(r, formatOf(to), true);
    out.copy_(r);
  } else {
    out.copy_(wide);
  }
  return out;
}

bool reachesExactLimit(const at::Tensor& t) {
  return t.numel() > 0 && t.abs().max().item<double>() >= kExactInFloat;
}

// Which rule a call computes under, and how: decided from its arguments.
enum class Kind { kNone, kInteger, kHalfInFloat, kCastStochastic, kAutoCast };

struct Plan {
  Kind kind = Kind::kNone;
  at::ScalarType narrow = at::kFloat;  // the dtype results return in
  nx::Format cast = nx::Format::kBFloat16;  // auto-cast's type
  bool all = false;                     // --auto-cast all
  bool stochastic = false;
};

template <class F>
void forEachTensor(c10::ArrayRef<c10::IValue> args, F&& f) {
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = args[i];
    if (v.isTensor()) f(v.toTensor(), i);
    else if (v.isTensorList())
      for (const at::Tensor& t : v.toTensorList()) f(t, i);
    else if (v.isList())
      for (const c10::IValue& x : v.toListRef())
        if (x.isTensor()) f(x.toTensor(), i);
  }
}

// A result that is a view of an argument (a view op) must stay one: no rule
// recomputes it.
bool returnsView(const c10::FunctionSchema& s) {
  for (const auto& r : s.returns())
    if (r.alias_info() && !r.alias_info()->isWrite()) return true;
  return false;
}

Plan planCall(const c10::OperatorHandle& op, const OpEntry& e, c10::ArrayRef<c10::IValue> args, uint32_t rules,
              uint64_t bits) {
  Plan p;
  if (returnsView(op.schema())) return p;
  if ((e.integer_math & bits) && dtypePolicy() == DtypePolicy::kTrainium) {
    at::ScalarType first = at::kFloat;
    bool found = false;
    forEachTensor(args, [&](const at::Tensor& t, size_t i) {
      if (!found && t.defined() && isInteger(t.scalar_type()) && op.schema().arguments()[i].name() != "index") {
        first = t.scalar_type();
        found = true;
      }
    });
    if (found) {
      p.kind = Kind::kInteger;
      p.narrow = first;
      return p;
    }
  }
  if (rules == 0) return p;
  p.stochastic = (rules & nx::kStochastic) != 0;
  // The dtypes of the call's data (0-dim tensors are Python numbers: they take no part).
  bool f32 = false, other_float = false;
  uint64_t halves = 0;
  forEachTensor(args, [&](const at::Tensor& t, size_t) {
    if (!t.defined() || t.dim() == 0) return;
    const at::ScalarType s = t.scalar_type();
    if (s == at::kFloat) f32 = true;
    else if (isHalf(s)) halves |= dtypeBit(s);
    else if (at::isFloatingType(s)) other_float = true;
  });
  int dtype_arg = -1;  // a dtype= argument naming the result's dtype
  for (size_t i = 0; i < args.size() && i < 64; ++i)
    if ((e.dtype_arg_mask >> i) & 1 && args[i].isInt()) dtype_arg = static_cast<int>(args[i].toInt());
  if (rules & (nx::kAutoCastMatmult | nx::kAutoCastAll)) {
    const bool all = (rules & nx::kAutoCastAll) != 0;
    if (f32 && !halves && !other_float && (dtype_arg < 0 || dtype_arg == static_cast<int>(at::kFloat)) &&
        (all || usesTensorEngine(e.base))) {
      p.kind = Kind::kAutoCast;
      p.all = all;
      p.cast = nx::autoCastType();
      return p;
    }
  }
  if (!p.stochastic || other_float) return p;
  if (!f32 && (halves == dtypeBit(at::kBFloat16) || halves == dtypeBit(at::kHalf)) &&
      (dtype_arg < 0 || isHalf(static_cast<at::ScalarType>(dtype_arg)))) {
    p.kind = Kind::kHalfInFloat;
    p.narrow = halves == dtypeBit(at::kHalf) ? at::kHalf : at::kBFloat16;
    if (dtype_arg >= 0) p.narrow = static_cast<at::ScalarType>(dtype_arg);
    return p;
  }
  if (f32 && !halves && dtype_arg >= 0 && isHalf(static_cast<at::ScalarType>(dtype_arg))) {
    p.kind = Kind::kCastStochastic;  // sum(x, dtype=bfloat16): computed in fp32, stored rounded
    p.narrow = static_cast<at::ScalarType>(dtype_arg);
  }
  return p;
}

struct Recast {
  const Plan& plan;
  const c10::FunctionSchema& schema;
  // (host alias the op writes, fp32 stand-in the kernel wrote instead)
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 2> written;
  bool reached = false;  // integers: an input reached 2^24

  bool castsArgument(const OpEntry& e, size_t i) const {
    if (plan.kind != Kind::kAutoCast) return true;
    // The Tensor Engine multiplies the operands; a bias (addmm's self) is added in fp32.
    const std::string& name = schema.arguments()[i].name();
    if (name == "bias") return false;
    if (name == "self" && (e.base == "aten::addmm" || e.base == "aten::addbmm" || e.base == "aten::baddbmm" ||
                           e.base == "aten::addmv"))
      return false;
    return true;
  }

  at::Tensor tensor(const at::Tensor& t, bool writes, bool casts) {
    if (!t.defined()) return t;
    const at::ScalarType s = t.scalar_type();
    at::Tensor wide;
    switch (plan.kind) {
      case Kind::kInteger:
        if (!isInteger(s) || !casts) return t;
        wide = t.to(at::kFloat);
        reached |= reachesExactLimit(t);
        break;
      case Kind::kHalfInFloat:
        if (!isHalf(s)) return t;
        wide = t.to(at::kFloat);
        break;
      case Kind::kAutoCast:
        if (s != at::kFloat || writes || !casts || t.dim() == 0) return t;
        wide = t.contiguous().clone();
        roundInPlace(wide, plan.cast, false);
        return wide;
      default:
        return t;
    }
    if (writes) written.emplace_back(t, wide);
    return wide;
  }

  c10::IValue value(const OpEntry& e, const c10::IValue& v, size_t i) {
    const bool writes = schema.arguments()[i].alias_info() && schema.arguments()[i].alias_info()->isWrite();
    const bool casts = castsArgument(e, i) && !(plan.kind == Kind::kInteger && schema.arguments()[i].name() == "index");
    if (v.isTensor()) return tensor(v.toTensor(), writes, casts);
    if (i < 64 && (e.dtype_arg_mask >> i) & 1 && v.isInt() &&
        (plan.kind == Kind::kHalfInFloat || plan.kind == Kind::kCastStochastic))
      return static_cast<int64_t>(at::kFloat);
    if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) out.push_back(tensor(t, writes, casts));
      return out;
    }
    return v;
  }

  // A result computed in fp32, in the dtype the op returns.
  at::Tensor finish(const at::Tensor& r) {
    if (!r.defined() || r.scalar_type() != at::kFloat) return r;
    switch (plan.kind) {
      case Kind::kInteger:
        reached |= reachesExactLimit(r);
        return r.to(plan.narrow);
      case Kind::kHalfInFloat: case Kind::kCastStochastic:
        return storedAs(r, plan.narrow, plan.stochastic);
      case Kind::kAutoCast:
        if (plan.all) {  // every op computes in the type: its result too
          at::Tensor t = r;
          roundInPlace(t, plan.cast, plan.stochastic);
          return t;
        }
        return r;
      default:
        return r;
    }
  }

  c10::IValue result(const c10::IValue& v) {
    auto one = [&](const at::Tensor& t) -> at::Tensor {
      for (const auto& [alias, wide] : written)
        if (t.defined() && t.unsafeGetTensorImpl() == wide.unsafeGetTensorImpl()) return alias;
      return finish(t);
    };
    if (v.isTensor()) return one(v.toTensor());
    if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) out.push_back(one(t));
      return out;
    }
    return v;
  }
};

std::mutex hits_mu;
std::map<std::string, uint64_t>& hits() {
  static auto* m = new std::map<std::string, uint64_t>();
  return *m;
}
std::atomic<void (*)(const std::string&)> g_rounding_reporter{nullptr};

}  // namespace

void readNumericsFacts(OpEntry& e) {
  if (integerInFloat(e.base))
    e.integer_math = dtypeBit(at::kByte) | dtypeBit(at::kChar) | dtypeBit(at::kShort) | dtypeBit(at::kInt) |
                     dtypeBit(at::kLong);
}

void runUnderNumerics(const c10::OperatorHandle& op, OpEntry& e, torch::jit::Stack* stack, uint64_t bits) {
  const uint32_t rules = activeRules();
  const size_t nargs = op.schema().arguments().size();
  const size_t first = stack->size() - nargs;
  const Plan plan = planCall(op, e, c10::ArrayRef<c10::IValue>(stack->data() + first, nargs), rules, bits);
  if (plan.kind == Kind::kNone) {
    if (e.host_kernel) e.host_kernel(op, stack);
    else runCpuKernel(op, e, stack, bits);
    return;
  }
  Recast recast{plan, op.schema()};
  torch::jit::Stack call;
  call.reserve(nargs);
  for (size_t i = 0; i < nargs; ++i) call.push_back(recast.value(e, (*stack)[first + i], i));
  stack->resize(first);
  if (e.host_kernel) e.host_kernel(op, &call);
  else op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &call);
  // In-place and out= arguments: the stand-in's values go back into the
  // caller's tensor, in its own dtype, rounded as the rule rounds.
  for (const auto& [alias, wide] : recast.written) {
    at::Tensor value = recast.finish(wide);
    if (!alias.sizes().equals(value.sizes())) alias.resize_(value.sizes());
    const_cast<at::Tensor&>(alias).copy_(value);
  }
  const size_t nret = op.schema().returns().size();
  for (size_t i = call.size() - nret; i < call.size(); ++i) stack->push_back(recast.result(call[i]));
  if (plan.kind == Kind::kInteger && recast.reached) noteRounding(e.name);
}

bool castUnderNumerics(const at::Tensor& src, const at::Tensor& dst) {
  const at::ScalarType to = dst.scalar_type();
  if (!(activeRules() & nx::kStochastic) || !(isHalf(to) || isStored8(to))) return false;
  const at::ScalarType from = src.scalar_type();
  if (from != at::kFloat && from != at::kDouble && !(isHalf(from) && isStored8(to))) return false;
  at::Tensor wide = src.to(at::kFloat).contiguous();
  if (wide.is_same(src)) wide = wide.clone();
  roundInPlace(wide, formatOf(to), true);
  const_cast<at::Tensor&>(dst).copy_(wide);
  return true;
}

bool reducesInFloat(at::ScalarType s) {
  if (isInteger(s)) return dtypePolicy() == DtypePolicy::kTrainium;
  return isHalf(s) && (activeRules() & nx::kStochastic);
}

void storeReduced(const at::Tensor& wide, const at::Tensor& dst, const char* op) {
  const at::ScalarType to = dst.scalar_type();
  if (isInteger(to) && reachesExactLimit(wide)) noteRounding(op);
  if (isHalf(to) && (activeRules() & nx::kStochastic)) {
    at::Tensor r = wide.contiguous().clone();
    roundInPlace(r, formatOf(to), true);
    const_cast<at::Tensor&>(dst).copy_(r);
    return;
  }
  const_cast<at::Tensor&>(dst).copy_(wide);
}

nx::Settings numericsSettings() {
  activeRules();
  return nx::settings();
}

std::vector<std::pair<std::string, uint64_t>> roundingHits() {
  std::lock_guard<std::mutex> lock(hits_mu);
  return {hits().begin(), hits().end()};
}

void clearRoundingHits() {
  std::lock_guard<std::mutex> lock(hits_mu);
  hits().clear();
}

void setRoundingReporter(void (*report)(const std::string&)) { g_rounding_reporter.store(report); }

void noteRounding(const std::string& op) {
  {
    std::lock_guard<std::mutex> lock(hits_mu);
    ++hits()[op];
  }
  if (reportActive())
    if (auto* report = g_rounding_reporter.load(std::memory_order_relaxed)) report(op);
}

}  // namespace neuron_sim
