// The path of one op that has no kernel of its own on neuron. Every such op
// arrives at neuronKernel (a boxed fallback on the PrivateUse1 key), which
// reads the call's facts in one walk over its arguments (call_facts.h) and
// goes forward from there; the op table says whether the op is native:
//   native   - the CPU kernel runs directly on arena memory: inputs are
//              aliased as CPU tensors, outputs are allocated in the arena
//              (ArenaScope) and adopted as neuron tensors. No copies.
//   fallback - the op leaves the device: inputs are copied to the host, the
//              CPU op runs, results are copied back; the op is recorded. (An
//              op that only reads its inputs reads them in place unless the
//              copies are observed: fallback_alias.h.)
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <ATen/native/CPUFallback.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>

#include "aten/device/generator.h"
#include "aten/device/guard.h"
#include "aten/execution/adaptive_eager.h"
#include "aten/execution/call_facts.h"
#include "aten/execution/compile_cache.h"
#include "aten/execution/device_events.h"
#include "aten/execution/dtype_policy.h"
#include "aten/execution/dtype_widening.h"
#include "aten/execution/execution.h"
#include "aten/execution/fallback_alias.h"
#include "aten/execution/fallback_policy.h"
#include "aten/execution/fast_path.h"
#include "aten/execution/finish_op.h"
#include "aten/execution/graph_lowering.h"
#include "aten/execution/numerics.h"
#include "aten/execution/op_table.h"
#include "aten/execution/placement.h"
#include "aten/execution/report_measures.h"
#include "aten/execution/tensor_alias.h"
#include "aten/memory/allocator.h"
#include "aten/neuron.h"
#include "aten/runtime_call.h"
#include "runtime/device.h"
#include "runtime/host_access.h"

namespace neuron_sim {
namespace {

using torch::jit::Stack;

struct Aliased {
  at::Tensor original;  // the neuron tensor the caller passed
  at::Tensor alias;     // the CPU view of its bytes given to the kernel
  const void* data;     // where its bytes were before the kernel ran
};

c10::IValue aliasArg(const c10::IValue& v, c10::SmallVector<Aliased, 8>& aliased) {
  auto alias = [&](const at::Tensor& t) {
    at::Tensor a = pooledHostAlias(t);
    aliased.push_back({t, a, t.storage().data()});
    return a;
  };
  if (v.isTensor()) return onNeuron(v.toTensor()) ? c10::IValue(alias(v.toTensor())) : v;
  if (v.isDevice()) return v.toDevice().type() == kNeuron ? c10::IValue(c10::Device(c10::kCPU)) : v;
  if (v.isList()) {
    bool any = false;
    for (const c10::IValue& e : v.toListRef()) any |= e.isTensor() && onNeuron(e.toTensor());
    if (!any) return v;
    c10::List<c10::IValue> copy = v.toList().copy();
    for (size_t i = 0; i < copy.size(); ++i) {
      c10::IValue e = copy.get(i);
      if (e.isTensor() && onNeuron(e.toTensor())) copy.set(i, alias(e.toTensor()));
    }
    return copy;
  }
  return v;
}

// A kernel output, as the neuron tensor it stands for.
at::Tensor toDevice(const at::Tensor& out, const c10::SmallVector<Aliased, 8>& aliased, int device) {
  if (!out.defined()) return out;
  for (const auto& a : aliased) {
    if (out.unsafeGetTensorImpl() == a.alias.unsafeGetTensorImpl()) return a.original;  // in-place / out=
    if (out.storage().is_alias_of(a.alias.storage())) return viewOnDevice(a.original, out);
  }
  return adoptAsDevice(out, device);
}

c10::IValue resultToDevice(const c10::IValue& v, const c10::SmallVector<Aliased, 8>& aliased, int device) {
  if (v.isTensor()) return toDevice(v.toTensor(), aliased, device);
  if (v.isTensorList()) {
    auto list = v.toTensorList();
    c10::List<at::Tensor> out;
    out.reserve(list.size());
    for (const at::Tensor& t : list) out.push_back(toDevice(t, aliased, device));
    return out;
  }
  return v;
}

// A kernel that resized an out= argument grew it inside the arena: move the
// new bytes and shape onto the caller's neuron tensor.
void writeBack(const Aliased& a, int device) {
  c10::StorageImpl* alias_storage = a.alias.storage().unsafeGetStorageImpl();
  if (alias_storage->data() != a.data) {
    c10::DataPtr fresh = alias_storage->set_data_ptr(c10::DataPtr(nullptr, c10::Device(c10::kCPU)));
    TORCH_INTERNAL_ASSERT(isArenaMemory(fresh) || fresh.get() == nullptr, "resized output left the arena");
    fresh.unsafe_set_device(neuronDevice(device));
    c10::StorageImpl* dst = a.original.storage().unsafeGetStorageImpl();
    dst->set_data_ptr_noswap(std::move(fresh));
    dst->set_nbytes(alias_storage->nbytes());
  }
  if (!a.alias.sizes().equals(a.original.sizes()) || !a.alias.strides().equals(a.original.strides()) ||
      a.alias.storage_offset() != a.original.storage_offset())
    a.original.unsafeGetTensorImpl()->set_sizes_and_strides(a.alias.sizes(), a.alias.strides(),
                                                            a.alias.storage_offset());
}

// The native path, forward from the call's facts: alias the inputs, narrow
// 64-bit values (dtype_policy.h), run the CPU kernel in the arena
// (dtype_widening.h), widen back, adopt the outputs, count the op, note its
// signature in the compile cache (compile_cache.h) and close its device
// event (device_events.h).
void runNative(const c10::OperatorHandle& op, OpEntry& e, Stack* stack, const CallFacts& facts) {
  const size_t nargs = op.schema().arguments().size();
  const size_t first = stack->size() - nargs;
  const int device = facts.device;
  std::optional<OpRecord> record;  // the op's device event, while anything records
  // (An op inside a compiled graph's launch is part of the graph's device event.)
  if (C10_UNLIKELY(recordingEvents()) && !inGraphLaunch()) {
    record.emplace(e, device, false);
    record->inputs(c10::ArrayRef<c10::IValue>(stack->data() + first, nargs));
  }
  c10::SmallVector<Aliased, 8> aliased;
  for (size_t i = first; i < first + nargs; ++i) (*stack)[i] = aliasArg((*stack)[i], aliased);
  useDeviceGenerators(e, stack, first, device);
  std::optional<HostDefaultGeneratorRedirect> rng;  // native_dropout draws without a Generator? argument
  if (C10_UNLIKELY(e.draws_host_default) && deviceRngStream())  // one number per element of its input
    rng.emplace(defaultGenerator(static_cast<c10::DeviceIndex>(device)), static_cast<uint64_t>((*stack)[first].toTensor().numel()));
  Narrowed narrowed;  // the 64-bit rule: compute float64/int64 in 32 bits
  if (C10_UNLIKELY(facts.narrow)) narrowArguments(e, stack, first, nargs, narrowed);
  {
    ArenaScope scope(device);
    // The device's numerics (numerics.h: stochastic rounding, auto-cast, integers in fp32): one branch when off.
    if (C10_UNLIKELY(numericsApply(e, facts.dtype_bits))) runUnderNumerics(op, e, stack, facts.dtype_bits);
    else if (e.host_kernel) e.host_kernel(op, stack);  // a native op with no CPU kernel (attention.cpp)
    else runCpuKernel(op, e, stack, facts.dtype_bits);  // widens a dtype the CPU kernel lacks (dtype_widening.cpp)
    if (C10_UNLIKELY(facts.narrow)) widenResults(narrowed, stack, op.schema().returns().size());
  }
  for (const auto& a : aliased) writeBack(a, device);
  const size_t nret = op.schema().returns().size();
  for (size_t i = stack->size() - nret; i < stack->size(); ++i)
    (*stack)[i] = resultToDevice((*stack)[i], aliased, device);
  for (auto& a : aliased) recycleHostAlias(std::move(a.alias));  // results hold originals now, not aliases
  finishOp(e, facts, record, c10::ArrayRef<c10::IValue>(stack->data() + stack->size() - nret, nret));
}

void returnsToDevice(const c10::OperatorHandle& op, Stack* stack, int device) {
  const size_t nret = op.schema().returns().size();
  for (size_t i = stack->size() - nret; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().device().is_cpu()) {
      v = v.toTensor().to(neuronDevice(device));
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      for (size_t j = 0; j < list.size(); ++j) {
        at::Tensor t = list.get(j);
        if (t.defined() && t.device().is_cpu()) list.set(j, t.to(neuronDevice(device)));
      }
    }
  }
}

// native_batch_norm updates running_mean and running_var (arguments 3 and 4)
// in place, but its schema does not mark them as written, so cpu_fallback
// would update host copies and drop them. Those two get host copies of our
// own, written back after the op.
bool writesUndeclaredRunningStats(const c10::OperatorHandle& op) {
  static const c10::OperatorHandle bn = c10::Dispatcher::singleton().findSchemaOrThrow("aten::native_batch_norm", "");
  static const c10::OperatorHandle bn_out =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::native_batch_norm", "out");
  return op == bn || op == bn_out;
}

// The fallback of an op PyTorch has no CPU kernel for but the emulator
// computes (a host kernel: linear_backward, the batch_norm_* helpers...),
// as when a native-op table leaves it out: the inputs are copied to the host,
// the host kernel runs there, and the results (and out= arguments) are
// copied back - what cpu_fallback does with a CPU kernel.
void hostKernelFallback(const c10::OperatorHandle& op, const OpEntry& e, Stack* stack, int device) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const size_t first = stack->size() - nargs;
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 2> written;  // (host copy, the caller's tensor)
  for (size_t i = 0; i < nargs; ++i) {
    c10::IValue& v = (*stack)[first + i];
    if (!v.isTensor() || !onNeuron(v.toTensor())) continue;
    at::Tensor original = v.toTensor();
    at::Tensor host = original.cpu();
    const auto* alias = schema.arguments()[i].alias_info();
    if (alias != nullptr && alias->isWrite()) written.emplace_back(host, original);
    v = host;
  }
  e.host_kernel(op, stack);
  for (auto& [host, original] : written) {
    if (!original.sizes().equals(host.sizes())) original.resize_(host.sizes());
    original.copy_(host);
  }
  const size_t nret = schema.returns().size();
  for (size_t i = stack->size() - nret; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (!v.isTensor() || !v.toTensor().defined()) continue;
    const at::Tensor t = v.toTensor();
    auto out = std::find_if(written.begin(), written.end(), [&](const auto& w) { return w.first.is_same(t); });
    v = out != written.end() ? out->second : t.to(neuronDevice(device));
  }
}

void runFallback(const c10::OperatorHandle& op, OpEntry& e, Stack* stack, const CallFacts& facts, FallbackWhy why) {
  flushAllPoint(runtime::adaptive::Flush::kFallback);  // adaptive eager: the op leaves the device
  if (!e.untracked) {
    e.fallbacks.fetch_add(1, std::memory_order_relaxed);
    if (fallbackMode() == FallbackMode::kError) raiseFallbackDisabled(e, why);
    if (!e.announced.load(std::memory_order_relaxed)) announceFallback(e, why);
    if (C10_UNLIKELY(reportActive())) reportFallback(e);  // records the user's source line
  }
  const size_t nargs = op.schema().arguments().size();
  const size_t first = stack->size() - nargs;
  // The fallback runs on the CPU and draws from the CPU generator, as the
  // release's does (NEURON_SIM_RNG=all: from the device's).
  if (!e.generator_args.empty() && fallbackDrawsDevice()) useDeviceGenerators(e, stack, first, facts.device);
  std::optional<HostDefaultGeneratorRedirect> rng;
  if (C10_UNLIKELY(e.draws_host_default) && fallbackDrawsDevice())
    rng.emplace(defaultGenerator(static_cast<c10::DeviceIndex>(facts.device)),
                static_cast<uint64_t>((*stack)[first].toTensor().numel()));
  const bool host_kernel = C10_UNLIKELY(e.host_kernel != nullptr) && !op.hasKernelForDispatchKey(c10::DispatchKey::CPU);
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 2> running_stats;  // (neuron tensor, host copy)
  if (C10_UNLIKELY(writesUndeclaredRunningStats(op))) {
    for (size_t i : {size_t{3}, size_t{4}}) {
      c10::IValue& v = (*stack)[first + i];
      if (!v.isTensor() || !onNeuron(v.toTensor())) continue;
      at::Tensor host = v.toTensor().cpu();  // cpu_fallback passes CPU tensors through as they are
      running_stats.emplace_back(v.toTensor(), host);
      v = host;
    }
  }
  std::optional<OpRecord> record;  // the round trip's device events, while anything records
  if (C10_UNLIKELY(recordingEvents() && !e.untracked)) {
    record.emplace(e, facts.device, true);
    record->inputs(c10::ArrayRef<c10::IValue>(stack->data() + first, nargs));
  }
  if (host_kernel) {
    hostKernelFallback(op, e, stack, facts.device);
  } else if (running_stats.empty() && facts.host_target < 0 && fallbackReadingInPlace(op, stack, facts.device)) {
    // An op that only reads its inputs read them in place (fallback_alias.h).
  } else {
    at::native::cpu_fallback(op, stack);
    for (auto& [device_stats, host] : running_stats) device_stats.copy_(host);
    if (C10_UNLIKELY(facts.host_target >= 0)) returnsToDevice(op, stack, facts.host_target);
  }
  if (C10_UNLIKELY(record)) {
    const size_t nret = op.schema().returns().size();
    record->finish(c10::ArrayRef<c10::IValue>(stack->data() + stack->size() - nret, nret));
  }
}

// "[Tensor(shape=[2, 3], dtype=Float, device=neuron:0), 1]" for error messages (cold path).
std::string describeArgs(const c10::OperatorHandle& op, const Stack& stack) {
  const size_t nargs = op.schema().arguments().size();
  std::ostringstream out;
  out << "[";
  for (size_t i = stack.size() >= nargs ? stack.size() - nargs : 0, k = 0; i < stack.size(); ++i, ++k) {
    if (k) out << ", ";
    const c10::IValue& v = stack[i];
    if (v.isTensor() && v.toTensor().defined())
      out << "Tensor(shape=" << v.toTensor().sizes() << ", dtype=" << v.toTensor().scalar_type()
          << ", device=" << v.toTensor().device() << ")";
    else if (v.isTensorList()) out << "[" << v.toTensorList().size() << " tensors]";
    else out << v;
  }
  out << "]";
  return out.str();
}

// Every op without a kernel of its own. One walk reads the call's facts;
// the op then goes native or falls back, and never scans its arguments again.
void neuronKernel(const c10::OperatorHandle& op, c10::DispatchKeySet, Stack* stack) {
  if (C10_UNLIKELY(runtime::inBadFork())) runtimeCall(&runtime::checkNotForked);
  runtime::HostAccess access;  // NEURON_SIM_PROTECT: kernels may touch arena pages
  OpEntry& e = opEntry(op);
  OpTimer timer(e);
  // Inside a compiled graph's launch an op is the graph's: it runs on the
  // device when the device compiler lowers it, native in eager or not
  // (graph_lowering.h), and writes through a strided view as a compiled
  // graph does; with tensors elsewhere it falls back. Eager calls never ask.
  const bool eager_native = e.native.load(std::memory_order_relaxed);
  const bool lowered = !eager_native && C10_UNLIKELY(inGraphLaunch()) && compilerLowers(e);
  const CallFacts facts = callFacts(e, eager_native || lowered, *stack, op.schema().arguments().size());
  const bool native = eager_native || (lowered && facts.placement == Placement::kOk);
  if (C10_UNLIKELY(!e.generator_args.empty())) checkGeneratorPlacement(op, facts);
  // The device computes in no complex dtype (docs/semantics.md): a native op
  // called on complex tensors takes the CPU fallback, as on the real backend.
  if (native && checkInputs(op, e, *stack, facts) && C10_LIKELY(!facts.complex) &&
      (C10_LIKELY(!e.in_place) || inGraphLaunch() || writesContiguously(op, e, *stack))) {
    // The device's own argument checks: their errors propagate as raised.
    if (Precondition check = e.precondition.load(std::memory_order_relaxed); C10_UNLIKELY(check != nullptr))
      check(op, *stack);
    std::string args;  // for the fallback-disabled message, taken before the kernel consumes the stack
    if (C10_UNLIKELY(fallbackOnlyForUnimplemented())) args = describeArgs(op, *stack);
    try {
      runNative(op, e, stack, facts);
    } catch (const c10::IndexError&) {
      throw;  // argument errors are the caller's: the real backend re-raises them, never falls back
    } catch (const c10::ValueError&) {
      throw;
    } catch (const c10::TypeError&) {
      throw;
    } catch (const c10::Error& ex) {
      // The real backend retries a failing native op on the CPU, where this
      // kernel (the same one) would fail the same way - unless told not to.
      if (!fallbackOnlyForUnimplemented()) throw;
      // The device's message; the implementation is the emulator's kernel.
      TORCH_CHECK(false, "CPU fallback disabled because TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1. "
                  "Operation ", e.name, " failed to execute on Neuron (last implementation: EmulatorKernel). "
                  "Details: EmulatorKernel: ", ex.what_without_backtrace(), ". Args: ", args,
                  ". Unset the variable (or set it to 0) to let failing ops fall back to CPU.");
    }
  } else {
    FallbackCopies copies(timer.on() ? &e : nullptr);  // its host round trip counts towards the op
    // Which condition above sent the call here (the fallback path only).
    const FallbackWhy why = !native ? FallbackWhy::kNotNative
                            : facts.complex ? FallbackWhy::kComplex
                            : facts.placement == Placement::kForeign &&
                                      e.inputs.load(std::memory_order_relaxed) == InputCheck::kFallback
                                  ? FallbackWhy::kHostInput
                                  : FallbackWhy::kNonContiguousWrite;
    runFallback(op, e, stack, facts, why);
  }
}

// Each op's registrations live in libraries of their own: destroying one
// removes the op's kernel from the dispatcher, and the op is routed as it was
// before (e.g. clamp_.Tensor back to its composite, which reaches the native
// clamp.Tensor_out). native_ops.override() relies on it to restore the
// routing it found.
struct DirectKernel {
  std::unique_ptr<torch::Library> kernel;       // PrivateUse1
  std::unique_ptr<torch::Library> passthrough;  // AutogradPrivateUse1, if any
};

std::unordered_map<std::string, DirectKernel>& directKernels() {
  static auto* kernels = new std::unordered_map<std::string, DirectKernel>();
  return *kernels;
}

std::unique_ptr<torch::Library> implLibrary(c10::DispatchKey key) {
  return std::make_unique<torch::Library>(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
}

}  // namespace

void registerNativeKernels(const std::vector<std::string>& names) {
  for (const auto& n : names) {
    DirectKernel& d = directKernels()[n];
    if (d.kernel) continue;
    d.kernel = implLibrary(c10::DispatchKey::PrivateUse1);
    if (std::optional<torch::CppFunction> unboxed = unboxedKernel(n)) d.kernel->impl(n.c_str(), std::move(*unboxed));
    else d.kernel->impl(n.c_str(), torch::CppFunction::makeFromBoxedFunction<&neuronKernel>());
  }
}

void runBoxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  neuronKernel(op, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
}

// Composite ops the device registers without an autograd formula (isfinite,
// one_hot, index_select_backward): autograd passes them through to the
// device's kernel, so their outputs carry no grad_fn, as on the device.
void registerAutogradPassthrough(const std::vector<std::string>& names) {
  for (const auto& n : names) {
    DirectKernel& d = directKernels()[n];
    if (d.passthrough) continue;
    d.passthrough = implLibrary(c10::DispatchKey::AutogradPrivateUse1);
    d.passthrough->impl(n.c_str(), torch::CppFunction::makeFallthrough());
  }
}

void removeNativeKernels(const std::vector<std::string>& names) {
  for (const auto& n : names) directKernels().erase(n);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuronKernel>());
}

}  // namespace neuron_sim
