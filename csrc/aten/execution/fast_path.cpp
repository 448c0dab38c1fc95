// The unboxed path of the hottest native ops: elementwise arithmetic, the
// matmuls and linear, activations, reductions and softmax's backward - the bulk of a
// training step (softmax itself has a host kernel: the boxed path's). Each does what
// runNative (execution.cpp) does - host aliases of the inputs, the CPU kernel
// inside an ArenaScope, the output adopted as a neuron tensor, the op counted
// and its signature noted - without boxing the arguments into a stack and
// unboxing them again for the CPU kernel: for a 1,024-element add that
// round trip costs about as much as the add itself.
//
// The op table decides which ops it may take (OpEntry::fast: native, no host
// kernel; a device check runs here as on the boxed path, before the kernel),
// and the call's facts (call_facts.h, read in the
// same walk as the boxed path's) which calls: every tensor on one neuron
// device (0-dim ones elsewhere aside: the CPU kernel reads a Python number's
// tensor as it is, as the boxed path passes it), nothing complex, nothing
// 64-bit (the 64-bit rule is the boxed path's). It times the op for an active
// migration report and records its device event as runNative does (OpTimer,
// OpRecord), so profiling and reporting keep the fast path. Any other call,
// and any kernel error, goes through the boxed path, which owns every rule
// (fallback, the 64-bit rule, error wording); so this file adds speed, never
// behaviour. The ops listed always return a fresh tensor, never a view of an
// input (the boxed path's toDevice handles views; this one need not), or
// write an out= tensor that already has the result's shape (mm.out and
// addmm.out, the extern matmuls of Inductor's graphs).
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "aten/execution/fast_path.h"

#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/linear_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/sigmoid_backward_ops.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/silu_backward_ops.h>
#include <ATen/ops/silu_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/tanh_backward_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/threshold_backward_ops.h>

#include <atomic>
#include <optional>
#include <tuple>
#include <utility>

#include "aten/execution/call_facts.h"
#include "aten/execution/compile_cache.h"
#include "aten/execution/device_events.h"
#include "aten/execution/execution.h"
#include "aten/execution/fallback_policy.h"
#include "aten/execution/finish_op.h"
#include "aten/execution/numerics.h"
#include "aten/execution/op_table.h"
#include "aten/execution/report_measures.h"
#include "aten/execution/tensor_alias.h"
#include "aten/memory/allocator.h"
#include "aten/neuron.h"
#include "runtime/device.h"
#include "runtime/host_access.h"

namespace neuron_sim {
namespace {

// The op's device check (registerPrecondition), run as the boxed path runs
// it: on a stack of the call's arguments, its errors raised as they are.
template <class... Args>
void checkPrecondition(const OpEntry& e, const c10::OperatorHandle& op, const Args&... args) {
  const Precondition check = e.precondition.load(std::memory_order_relaxed);
  if (C10_LIKELY(check == nullptr)) return;
  torch::jit::Stack stack;
  stack.reserve(sizeof...(Args));
  (stack.emplace_back(args), ...);
  check(op, stack);
}

template <class Op, class Schema = typename Op::schema>
struct Unboxed;

template <class Op, class... Args>
struct Unboxed<Op, at::Tensor(Args...)> {
  static const c10::OperatorHandle& handle() {
    static const c10::OperatorHandle op =
        c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
    return op;
  }

  static at::Tensor boxed(Args... args) {
    torch::jit::Stack stack;
    stack.reserve(sizeof...(Args));
    (stack.emplace_back(args), ...);
    runBoxed(handle(), &stack);
    return std::move(stack.back()).toTensor();
  }

  static at::Tensor call(Args... args) {
    static OpEntry& e = opEntry(handle());  // entries live as long as the process
    if (!e.fast.load(std::memory_order_relaxed) || C10_UNLIKELY(runtime::inBadFork())) return boxed(args...);
    FactWalk walk(e, /*native=*/true);
    int i = 0;
    (walk.add(args, i++), ...);
    const CallFacts facts = walk.finish();
    // The device's numerics (numerics.h) are the boxed path's: one branch when off.
    if (!facts.on_neuron || facts.placement != Placement::kOk || facts.complex || facts.wide ||
        C10_UNLIKELY(numericsApply(e, facts.dtype_bits)))
      return boxed(args...);
    checkPrecondition(e, handle(), args...);
    std::optional<at::Tensor> out = run(e, facts, args...);
    return out ? *std::move(out) : boxed(args...);
  }

  // The op on arena memory, or nullopt: the boxed path takes the call (and
  // times and records it itself, so nothing here has counted it yet). While
  // nothing observes ops (no migration report, nothing recording device
  // events) the call needs neither a timer nor a record, and this frame holds
  // none; otherwise run observed.
  static std::optional<at::Tensor> run(OpEntry& e, const CallFacts& facts, Args... args) {
    if (C10_UNLIKELY(reportActive() || recordingEvents())) return runObserved(e, facts, args...);
    runtime::HostAccess access;  // NEURON_SIM_PROTECT: the kernel touches arena pages
    at::Tensor out;
    if (!kernel(e, facts, out, args...)) return std::nullopt;
    finishOp(e, facts);
    return out;
  }

  static C10_NOINLINE std::optional<at::Tensor> runObserved(OpEntry& e, const CallFacts& facts, Args... args) {
    OpTimer timer(e);            // while a migration report measures: the op's wall time
    runtime::HostAccess access;
    std::optional<OpRecord> record;  // the op's device event, while anything records
    if (C10_UNLIKELY(recordingEvents()) && !inGraphLaunch()) {
      record.emplace(e, facts.device, false, timer.startNs());
      (record->input(args), ...);
    }
    at::Tensor out;
    if (!kernel(e, facts, out, args...)) {
      timer.cancel();
      return std::nullopt;
    }
    finishOp(e, facts, record, c10::IValue(out));
    if (C10_UNLIKELY(record)) timer.endAt(record->endNs());
    return out;
  }

  // The CPU kernel on the inputs' host aliases, its output adopted as a
  // neuron tensor; false when the boxed path is to take the call instead.
  static bool kernel(OpEntry& e, const CallFacts& facts, at::Tensor& out, Args... args) {
    try {
      // A tensor goes to the CPU kernel as its host alias (tensor_alias.h),
      // what is no tensor as it is.
      HostAliases hosts;
      ArenaScope scope(facts.device);
      out = Op::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), hosts.of(args)...);
    } catch (const c10::NotImplementedError&) {
      return false;  // a dtype the CPU kernel lacks: the boxed path widens it (dtype_widening.h)
    } catch (const c10::Error&) {
      // The boxed path words this error: the fallback-disabled one, or the device's own check (precondition).
      if (!fallbackOnlyForUnimplemented() && e.precondition == nullptr) throw;
      return false;
    }
    out = adoptAsDevice(std::move(out), facts.device);
    return true;
  }
};

// The out= form of a matmul, as an Inductor graph calls it for its extern
// kernels (extern_kernels.mm/addmm(..., out=buf), several per launch): the
// same path as above, the result written into the caller's neuron tensor.
// Only a call whose out= tensor already has the result's shape: the CPU
// kernel then writes its bytes in place and never resizes it (a resize is
// the boxed path's writeBack). `Shape` gives the result's rows and columns.
template <class Op, class Shape, class Schema = typename Op::schema>
struct UnboxedOut;

template <class Op, class Shape, class... Args>
struct UnboxedOut<Op, Shape, at::Tensor&(Args...)> {
  static const c10::OperatorHandle& handle() {
    static const c10::OperatorHandle op =
        c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
    return op;
  }

  static at::Tensor& boxed(Args... args) {
    torch::jit::Stack stack;
    stack.reserve(sizeof...(Args));
    (stack.emplace_back(args), ...);
    runBoxed(handle(), &stack);
    return last(args...);
  }

  template <class... Rest>
  static at::Tensor& last(Rest&&... rest) {
    return std::get<sizeof...(Rest) - 1>(std::forward_as_tuple(rest...));
  }

  static at::Tensor& call(Args... args) {
    static OpEntry& e = opEntry(handle());
    if (!e.fast.load(std::memory_order_relaxed) || C10_UNLIKELY(runtime::inBadFork())) return boxed(args...);
    at::Tensor& out = last(args...);
    if (!out.defined() || !Shape::matches(out, args...)) return boxed(args...);
    FactWalk walk(e, /*native=*/true);
    int i = 0;
    (walk.add(args, i++), ...);
    const CallFacts facts = walk.finish();
    if (!facts.on_neuron || facts.placement != Placement::kOk || facts.complex || facts.wide ||
        out.device().type() != kNeuron || C10_UNLIKELY(numericsApply(e, facts.dtype_bits)))
      return boxed(args...);
    checkPrecondition(e, handle(), args...);
    return run(e, facts, out, args...) ? out : boxed(args...);
  }

  // Whether the op ran (else the boxed path takes the call, as Unboxed::run).
  static bool run(OpEntry& e, const CallFacts& facts, at::Tensor& out, Args... args) {
    OpTimer timer(e);
    runtime::HostAccess access;
    std::optional<OpRecord> record;
    if (C10_UNLIKELY(recordingEvents()) && !inGraphLaunch()) {
      record.emplace(e, facts.device, false, timer.startNs());
      (record->input(args), ...);
    }
    try {
      HostAliases hosts;
      ArenaScope scope(facts.device);
      Op::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), hostArg(hosts, args)...);
    } catch (const c10::NotImplementedError&) {
      timer.cancel();
      return false;
    } catch (const c10::Error&) {
      if (!fallbackOnlyForUnimplemented() && e.precondition == nullptr) throw;
      timer.cancel();
      return false;
    }
    finishOp(e, facts, record, c10::IValue(out));
    if (C10_UNLIKELY(record)) timer.endAt(record->endNs());
    return true;
  }

  // The CPU kernel's argument: a tensor's host alias (the written one too), anything else as it is.
  template <class T>
  static const T& hostArg(HostAliases& hosts, const T& v) {
    return hosts.of(v);
  }
  static at::Tensor& hostArg(HostAliases& hosts, at::Tensor& v) { return const_cast<at::Tensor&>(hosts.of(v)); }
};

// mm.out(self, mat2, out) and addmm.out(self, mat1, mat2, beta, alpha, out):
// the result is rows of the first factor by columns of the second.
struct MmShape {
  static bool matches(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor&) {
    return a.dim() == 2 && b.dim() == 2 && out.dim() == 2 && out.size(0) == a.size(0) && out.size(1) == b.size(1);
  }
};
struct AddmmShape {
  static bool matches(const at::Tensor& out, const at::Tensor&, const at::Tensor& a, const at::Tensor& b,
                      const c10::Scalar&, const c10::Scalar&, const at::Tensor&) {
    return MmShape::matches(out, a, b, out);
  }
};

template <class Op>
torch::CppFunction kernel() {
  return torch::CppFunction::makeFromUnboxedFunction(TORCH_FN(Unboxed<Op>::call));
}

template <class Op, class Shape>
torch::CppFunction outKernel() {
  return torch::CppFunction::makeFromUnboxedFunction(TORCH_FN((UnboxedOut<Op, Shape>::call)));
}

}  // namespace

std::optional<torch::CppFunction> unboxedKernel(const std::string& name) {
  namespace ops = at::_ops;
  if (name == "aten::add.Tensor") return kernel<ops::add_Tensor>();
  if (name == "aten::sub.Tensor") return kernel<ops::sub_Tensor>();
  if (name == "aten::mul.Tensor") return kernel<ops::mul_Tensor>();
  if (name == "aten::div.Tensor") return kernel<ops::div_Tensor>();
  if (name == "aten::mm") return kernel<ops::mm>();
  if (name == "aten::bmm") return kernel<ops::bmm>();
  if (name == "aten::addmm") return kernel<ops::addmm>();
  if (name == "aten::mm.out") return outKernel<ops::mm_out, MmShape>();
  if (name == "aten::addmm.out") return outKernel<ops::addmm_out, AddmmShape>();
  if (name == "aten::linear") return kernel<ops::linear>();  // kept whole, as the device runs it
  if (name == "aten::relu") return kernel<ops::relu>();
  if (name == "aten::threshold_backward") return kernel<ops::threshold_backward>();
  if (name == "aten::neg") return kernel<ops::neg>();
  if (name == "aten::exp") return kernel<ops::exp>();
  if (name == "aten::gelu") return kernel<ops::gelu>();
  if (name == "aten::gelu_backward") return kernel<ops::gelu_backward>();
  if (name == "aten::silu") return kernel<ops::silu>();
  if (name == "aten::silu_backward") return kernel<ops::silu_backward>();
  if (name == "aten::sigmoid") return kernel<ops::sigmoid>();
  if (name == "aten::sigmoid_backward") return kernel<ops::sigmoid_backward>();
  if (name == "aten::tanh") return kernel<ops::tanh>();
  if (name == "aten::tanh_backward") return kernel<ops::tanh_backward>();
  if (name == "aten::sum") return kernel<ops::sum>();
  if (name == "aten::sum.dim_IntList") return kernel<ops::sum_dim_IntList>();
  if (name == "aten::mean") return kernel<ops::mean>();
  if (name == "aten::mean.dim") return kernel<ops::mean_dim>();
  if (name == "aten::_softmax_backward_data") return kernel<ops::_softmax_backward_data>();
  if (name == "aten::_log_softmax_backward_data") return kernel<ops::_log_softmax_backward_data>();
  return std::nullopt;
}

}  // namespace neuron_sim
