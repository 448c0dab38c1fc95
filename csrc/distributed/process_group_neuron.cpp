#include "distributed/process_group_neuron.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/view_as_real.h>

#include <cstring>

#include "aten/execution/tensor_alias.h"
#include "aten/neuron.h"
#include "distributed/collective_stats.h"
#include "profiler/record.h"

namespace neuron_sim::distributed {
namespace {

using c10d::OpType;
using c10d::ReduceOp;
using c10d::Work;
using WorkPtr = c10::intrusive_ptr<Work>;

uint64_t bytesOf(const at::Tensor& t) { return static_cast<uint64_t>(t.numel()) * t.element_size(); }

uint64_t bytesOf(const std::vector<at::Tensor>& ts) {
  uint64_t n = 0;
  for (const auto& t : ts) n += bytesOf(t);
  return n;
}

// "" when every tensor is a neuron tensor, else the reason (names the fix).
std::string notOnDevice(const std::vector<at::Tensor>& ts) {
  for (const auto& t : ts) {
    if (!t.defined()) return "got an undefined tensor";
    if (t.device().type() != kNeuron)
      return "got a tensor on " + t.device().str() +
             "; a 'neuron' process group runs collectives on neuron tensors. Move it with tensor.to('neuron'), "
             "or create the group with init_process_group('cpu:gloo,neuron:neuron') so CPU tensors use gloo";
    if (t.is_sparse()) return "sparse tensors are not supported by the neuron backend";
  }
  return "";
}

std::string joinErrors(std::initializer_list<std::string> errs) {
  for (const auto& e : errs)
    if (!e.empty()) return e;
  return "";
}

// ---- staging: how a device tensor is seen by gloo --------------------------
//
// Device bytes are host memory: a contiguous tensor is handed to gloo as a
// host alias, no copy. Anything gloo cannot take as it is (non-contiguous
// layouts, dtypes it cannot reduce) goes through a contiguous staging tensor
// allocated on the same device (so it counts in HBM accounting), copied back
// by a finishing step when gloo has written it.
struct Staging {
  std::vector<at::Tensor> keep;  // device tensors gloo reads or writes
  std::vector<Finish> steps;     // run in order when gloo is done
};

// Any dtype moves as bytes: a flat uint8 view of a contiguous host tensor.
at::Tensor asBytes(const at::Tensor& host) { return host.reshape({-1}).view(at::kByte); }

// A contiguous host view of `t` for gloo to read.
at::Tensor readable(const at::Tensor& t, Staging& s) {
  if (t.is_contiguous()) return hostAlias(t);
  at::Tensor tmp = at::empty(t.sizes(), t.options().memory_format(at::MemoryFormat::Contiguous));
  at::Tensor h = hostAlias(tmp);
  h.copy_(hostAlias(t));
  s.keep.push_back(tmp);
  return h;
}

// A contiguous host view of `t` for gloo to write; a staged one is copied back
// into `t` by a finishing step (only when `write_back`).
at::Tensor writable(const at::Tensor& t, Staging& s, bool copy_in, bool write_back = true) {
  if (t.is_contiguous()) return hostAlias(t);
  at::Tensor tmp = at::empty(t.sizes(), t.options().memory_format(at::MemoryFormat::Contiguous));
  at::Tensor h = hostAlias(tmp);
  if (copy_in) h.copy_(hostAlias(t));
  s.keep.push_back(tmp);
  if (write_back) {
    at::Tensor dst = hostAlias(t);
    s.steps.push_back([h, dst]() mutable { dst.copy_(h); });
  }
  return h;
}

// ---- reductions ------------------------------------------------------------

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

// The dtype a reduction of `s` runs in: gloo's own, else a wider one whose
// result narrows back exactly (integer arithmetic wraps the same way; every
// float8 value is exact in float32).
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

// How one reduction runs on gloo: the op gloo runs, and what is composed around it.
struct Reduction {
  ReduceOp gloo_op;
  bool average = false;      // AVG = SUM, then divide by the group size
  bool premul = false;       // PREMUL_SUM = multiply by a factor, then SUM
  double factor = 1.0;
};

// Validates `op` for `dtype` ("" when fine) and fills `r`.
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
  return "";
}

// A host buffer gloo reduces in place for device tensor `t`: its alias when
// gloo can take it as it is, else a staging tensor. `copy_in`: starts as `t`.
at::Tensor reducible(const at::Tensor& t, const Reduction& r, Staging& s, bool copy_in, bool write_back) {
  at::ScalarType work = *reduceDtype(t.scalar_type());
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
      s.steps.push_back([src, dst]() mutable { dst.copy_(src); });
    }
  }
  if (complex) buf = at::view_as_real(buf);
  if (r.premul) buf.mul_(r.factor);
  return buf;
}

// The averaging step must come before the buffer is copied back (a narrower
// dtype would wrap before dividing): insert it at the front.
void averageFirst(const at::Tensor& buf, int size, Staging& s) {
  at::Tensor b = buf;
  s.steps.insert(s.steps.begin(), [b, size]() mutable {
    if (at::isIntegralType(b.scalar_type(), /*includeBool=*/true))
      b.div_(size, "trunc");
    else
      b.div_(size);
  });
}

int64_t reduceCode(const ReduceOp& op) { return static_cast<int64_t>(op.op_); }

}  // namespace

ProcessGroupNeuron::ProcessGroupNeuron(c10::intrusive_ptr<c10d::Backend> gloo, c10::intrusive_ptr<c10d::Store> store,
                                       int rank, int size, std::chrono::milliseconds timeout)
    : Backend(rank, size), gloo_(std::move(gloo)), exchange_(StoreExchange::create(store, rank, size, timeout)),
      timeout_(timeout) {
  TORCH_CHECK(gloo_, "ProcessGroupNeuron needs a gloo backend");
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupNeuron::getBackendOptions() {
  return c10::make_intrusive<Options>("neuron", timeout_);
}

void ProcessGroupNeuron::setTimeout(std::chrono::milliseconds timeout) {
  gloo_->setTimeout(timeout);
  if (exchange_) exchange_->setTimeout(timeout);
  timeout_ = timeout;
}

std::string ProcessGroupNeuron::what(const char* op) const {
  return std::string("neuron collective ") + op + " on rank " + std::to_string(getRank());
}

void ProcessGroupNeuron::agree(const Signature& sig) {
  std::vector<int64_t> rec = encodeSignature(sig);
  std::vector<int64_t> all;
  try {
    if (exchange_) {
      all = exchange_->exchange(rec);
    } else {  // a store without queues: a gloo all-gather, which costs more thread switches
      at::Tensor mine = at::empty({kSignatureSlots}, at::kLong);
      std::memcpy(mine.data_ptr<int64_t>(), rec.data(), rec.size() * sizeof(int64_t));
      at::Tensor gathered = at::empty({static_cast<int64_t>(getSize()) * kSignatureSlots}, at::kLong);
      std::vector<std::vector<at::Tensor>> out{gathered.chunk(getSize())};
      std::vector<at::Tensor> in{mine};
      gloo_->allgather(out, in)->wait(timeout_);
      all.assign(gathered.data_ptr<int64_t>(), gathered.data_ptr<int64_t>() + gathered.numel());
    }
  } catch (...) {
    std::string msg;
    try {
      throw;
    } catch (const c10::Error& e) {
      msg = e.what_without_backtrace();
    } catch (const std::exception& e) {
      msg = e.what();
    }
    std::rethrow_exception(explainFailure(what(sig.op), msg, exchange_ ? exchange_->transport() : "gloo"));
  }
  std::string error = compareSignatures(sig, all.data(), getSize(), getRank());
  if (!error.empty()) TORCH_CHECK_VALUE(false, error);
}

WorkPtr ProcessGroupNeuron::finish(const char* c10d_op, uint64_t bytes, const char* op, WorkPtr gloo_work,
                                   OpType type, std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep_alive,
                                   std::vector<Finish> steps) {
  recordCollective(c10d_op, bytes);
  // On the simulated device timeline (docs/profiling.md): one event on the
  // tensors' device, costed as a ring of getSize() ranks over NeuronLink.
  if (C10_UNLIKELY(profiler::recording()))
    profiler::recordCollective(op, outputs.empty() ? -1 : outputs[0].device().index(), static_cast<double>(bytes),
                               getSize());
  return c10::make_intrusive<NeuronWork>(std::move(gloo_work), type, what(op), std::move(outputs),
                                         std::move(keep_alive), std::move(steps));
}

// ---- all_reduce / reduce / broadcast ---------------------------------------

WorkPtr ProcessGroupNeuron::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  Signature sig{"all_reduce", -1, reduceCode(opts.reduceOp), tensors};
  Reduction r;
  sig.local_error = notOnDevice(tensors);
  if (sig.local_error.empty() && tensors.empty()) sig.local_error = "no tensors given";
  if (sig.local_error.empty()) sig.local_error = planReduction(opts.reduceOp, tensors[0].scalar_type(), r);
  agree(sig);
  Staging s;
  std::vector<at::Tensor> bufs;
  for (auto& t : tensors) bufs.push_back(reducible(t, r, s, /*copy_in=*/true, /*write_back=*/true));
  if (r.average)
    for (auto& b : bufs) averageFirst(b, getSize(), s);
  c10d::AllreduceOptions o = opts;
  o.reduceOp = r.gloo_op;
  WorkPtr w = bufs.size() == 1 ? gloo_->allreduce(bufs, o)
                               : gloo_->allreduce_coalesced(bufs, c10d::AllreduceCoalescedOptions{o});
  return finish("c10d::allreduce_", bytesOf(tensors), "all_reduce", w, OpType::ALLREDUCE, tensors, s.keep, s.steps);
}

WorkPtr ProcessGroupNeuron::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                const c10d::AllreduceCoalescedOptions& opts) {
  Signature sig{"all_reduce_coalesced", -1, reduceCode(opts.reduceOp), tensors};
  Reduction r;
  sig.local_error = notOnDevice(tensors);
  if (sig.local_error.empty() && tensors.empty()) sig.local_error = "no tensors given";
  for (size_t i = 0; sig.local_error.empty() && i < tensors.size(); ++i) {
    if (tensors[i].scalar_type() != tensors[0].scalar_type())
      sig.local_error = "all tensors of a coalesced all_reduce must have the same dtype, got " +
                        describeTensor(tensors[0]) + " and " + describeTensor(tensors[i]);
  }
  if (sig.local_error.empty()) sig.local_error = planReduction(opts.reduceOp, tensors[0].scalar_type(), r);
  agree(sig);
  Staging s;
  std::vector<at::Tensor> bufs;
  for (auto& t : tensors) bufs.push_back(reducible(t, r, s, true, true));
  if (r.average)
    for (auto& b : bufs) averageFirst(b, getSize(), s);
  c10d::AllreduceCoalescedOptions o = opts;
  o.reduceOp = r.gloo_op;
  WorkPtr w = gloo_->allreduce_coalesced(bufs, o);
  return finish("c10d::allreduce_coalesced_", bytesOf(tensors), "all_reduce_coalesced", w,
                OpType::ALLREDUCE_COALESCED, tensors, s.keep, s.steps);
}

WorkPtr ProcessGroupNeuron::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  Signature sig{"reduce", opts.rootRank, reduceCode(opts.reduceOp), tensors};
  Reduction r;
  sig.local_error = joinErrors({notOnDevice(tensors), tensors.size() == 1 ? "" : "reduce takes exactly one tensor"});
  if (sig.local_error.empty()) sig.local_error = planReduction(opts.reduceOp, tensors[0].scalar_type(), r);
  agree(sig);
  bool root = opts.rootRank == getRank();
  Staging s;
  // Off the root the result is not defined; still, the caller's tensor is
  // left as it was when a staging buffer is used.
  at::Tensor buf = reducible(tensors[0], r, s, true, /*write_back=*/root);
  if (r.average && root) averageFirst(buf, getSize(), s);
  c10d::ReduceOptions o = opts;
  o.reduceOp = r.gloo_op;
  std::vector<at::Tensor> bufs{buf};
  WorkPtr w = gloo_->reduce(bufs, o);
  return finish("c10d::reduce_", bytesOf(tensors), "reduce", w, OpType::REDUCE, tensors, s.keep, s.steps);
}

WorkPtr ProcessGroupNeuron::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  Signature sig{"broadcast", opts.rootRank, -1, tensors};
  sig.local_error = joinErrors({notOnDevice(tensors), tensors.size() == 1 ? "" : "broadcast takes exactly one tensor"});
  agree(sig);
  bool root = opts.rootRank == getRank();
  Staging s;
  std::vector<at::Tensor> bufs{asBytes(writable(tensors[0], s, /*copy_in=*/root, /*write_back=*/!root))};
  c10d::BroadcastOptions o = opts;
  o.rootTensor = 0;
  WorkPtr w = gloo_->broadcast(bufs, o);
  return finish("c10d::broadcast_", bytesOf(tensors), "broadcast", w, OpType::BROADCAST, tensors, s.keep, s.steps);
}

// ---- all_gather ------------------------------------------------------------

WorkPtr ProcessGroupNeuron::allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                      const c10d::AllgatherOptions& opts) {
  Signature sig{"all_gather", -1, -1, inputs};
  sig.local_error = notOnDevice(inputs);
  if (sig.local_error.empty() && (inputs.size() != 1 || outputs.size() != 1))
    sig.local_error = "all_gather takes one input tensor and one output list";
  if (sig.local_error.empty()) {
    const auto& outs = outputs[0];
    if (static_cast<int>(outs.size()) != getSize())
      sig.local_error = "the output list has " + std::to_string(outs.size()) + " tensors; the group has " +
                        std::to_string(getSize()) + " ranks";
    else
      sig.local_error = notOnDevice(outs);
    for (size_t i = 0; sig.local_error.empty() && i < outs.size(); ++i)
      if (outs[i].sizes() != inputs[0].sizes() || outs[i].scalar_type() != inputs[0].scalar_type())
        sig.local_error = "output " + std::to_string(i) + " is " + describeTensor(outs[i]) + " but the input is " +
                          describeTensor(inputs[0]);
  }
  agree(sig);
  Staging s;
  std::vector<at::Tensor> in{asBytes(readable(inputs[0], s))};
  std::vector<std::vector<at::Tensor>> out(1);
  for (auto& t : outputs[0]) out[0].push_back(asBytes(writable(t, s, false)));
  WorkPtr w = gloo_->allgather(out, in, opts);
  return finish("c10d::allgather_", bytesOf(outputs[0]), "all_gather", w, OpType::ALLGATHER, outputs[0], s.keep,
                s.steps);
}

WorkPtr ProcessGroupNeuron::_allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  Signature sig{"all_gather_into_tensor", -1, -1, {input}};
  sig.local_error = notOnDevice({input, output});
  if (sig.local_error.empty() &&
      (output.numel() != input.numel() * getSize() || output.scalar_type() != input.scalar_type()))
    sig.local_error = "the output tensor must hold world_size (" + std::to_string(getSize()) +
                      ") times the input of the same dtype: output " + describeTensor(output) + ", input " +
                      describeTensor(input);
  agree(sig);
  Staging s;
  std::vector<at::Tensor> in{asBytes(readable(input, s))};
  std::vector<std::vector<at::Tensor>> out{asBytes(writable(output, s, false)).chunk(getSize())};
  WorkPtr w = gloo_->allgather(out, in, opts);
  return finish("c10d::_allgather_base_", bytesOf(output), "all_gather_into_tensor", w, OpType::_ALLGATHER_BASE,
                {output}, s.keep, s.steps);
}

// c10d (and gloo) lay the outputs out per rank: outputs[rank][i] receives rank's inputs[i].
WorkPtr ProcessGroupNeuron::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  Signature sig{"all_gather_coalesced", -1, -1, inputs};
  sig.local_error = notOnDevice(inputs);
  if (sig.local_error.empty() && static_cast<int>(outputs.size()) != getSize())
    sig.local_error = "all_gather_coalesced needs one output list per rank";
  for (size_t r = 0; sig.local_error.empty() && r < outputs.size(); ++r) {
    if (outputs[r].size() != inputs.size())
      sig.local_error = "output list " + std::to_string(r) + " must hold one tensor per input";
    else
      sig.local_error = notOnDevice(outputs[r]);
    for (size_t i = 0; sig.local_error.empty() && i < inputs.size(); ++i)
      if (outputs[r][i].sizes() != inputs[i].sizes() || outputs[r][i].scalar_type() != inputs[i].scalar_type())
        sig.local_error = "output " + describeTensor(outputs[r][i]) + " does not match input " + describeTensor(inputs[i]);
  }
  agree(sig);
  Staging s;
  std::vector<at::Tensor> in, flat_outputs;
  std::vector<std::vector<at::Tensor>> out(outputs.size());
  for (auto& t : inputs) in.push_back(asBytes(readable(t, s)));
  for (size_t r = 0; r < outputs.size(); ++r)
    for (auto& t : outputs[r]) {
      out[r].push_back(asBytes(writable(t, s, false)));
      flat_outputs.push_back(t);
    }
  WorkPtr w = gloo_->allgather_coalesced(out, in, opts);
  return finish("c10d::allgather_coalesced_", bytesOf(flat_outputs), "all_gather_coalesced", w,
                OpType::ALLGATHER_COALESCED, flat_outputs, s.keep, s.steps);
}

WorkPtr ProcessGroupNeuron::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllgatherOptions& opts) {
  Signature sig{"all_gather_into_tensor_coalesced", -1, -1, inputs};
  sig.local_error = joinErrors({notOnDevice(inputs), notOnDevice(outputs)});
  if (sig.local_error.empty() && outputs.size() != inputs.size())
    sig.local_error = "needs one output tensor per input";
  for (size_t i = 0; sig.local_error.empty() && i < inputs.size(); ++i)
    if (outputs[i].numel() != inputs[i].numel() * getSize() || outputs[i].scalar_type() != inputs[i].scalar_type())
      sig.local_error = "output " + describeTensor(outputs[i]) + " must hold world_size times input " +
                        describeTensor(inputs[i]);
  agree(sig);
  Staging s;
  std::vector<at::Tensor> in;
  std::vector<std::vector<at::Tensor>> out(getSize());  // per rank, as gloo lays them out
  for (size_t i = 0; i < inputs.size(); ++i) {
    in.push_back(asBytes(readable(inputs[i], s)));
    auto chunks = asBytes(writable(outputs[i], s, false)).chunk(getSize());
    for (int r = 0; r < getSize(); ++r) out[r].push_back(chunks[r]);
  }
  WorkPtr w = gloo_->allgather_coalesced(out, in, opts);
  return finish("c10d::allgather_into_tensor_coalesced_", bytesOf(outputs), "all_gather_into_tensor_coalesced", w,
                OpType::COALESCED, outputs, s.keep, s.steps);
}

// ---- gather / scatter ------------------------------------------------------

WorkPtr ProcessGroupNeuron::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                   const c10d::GatherOptions& opts) {
  Signature sig{"gather", opts.rootRank, -1, inputs};
  bool root = opts.rootRank == getRank();
  sig.local_error = joinErrors({notOnDevice(inputs), inputs.size() == 1 ? "" : "gather takes exactly one input"});
  if (sig.local_error.empty() && root) {
    if (outputs.size() != 1 || static_cast<int>(outputs[0].size()) != getSize())
      sig.local_error = "on the root, gather needs a list of one output tensor per rank";
    else
      sig.local_error = notOnDevice(outputs[0]);
    for (size_t i = 0; sig.local_error.empty() && i < outputs[0].size(); ++i)
      if (outputs[0][i].sizes() != inputs[0].sizes() || outputs[0][i].scalar_type() != inputs[0].scalar_type())
        sig.local_error = "output " + describeTensor(outputs[0][i]) + " does not match input " + describeTensor(inputs[0]);
  }
  agree(sig);
  Staging s;
  std::vector<at::Tensor> in{asBytes(readable(inputs[0], s))};
  std::vector<std::vector<at::Tensor>> out;
  std::vector<at::Tensor> results;
  if (root) {
    out.emplace_back();
    for (auto& t : outputs[0]) {
      out[0].push_back(asBytes(writable(t, s, false)));
      results.push_back(t);
    }
  }
  WorkPtr w = gloo_->gather(out, in, opts);
  return finish("c10d::gather_", bytesOf(inputs) * getSize(), "gather", w, OpType::GATHER, results, s.keep, s.steps);
}

WorkPtr ProcessGroupNeuron::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                    const c10d::ScatterOptions& opts) {
  Signature sig{"scatter", opts.rootRank, -1, outputs};
  bool root = opts.rootRank == getRank();
  sig.local_error = joinErrors({notOnDevice(outputs), outputs.size() == 1 ? "" : "scatter takes exactly one output"});
  if (sig.local_error.empty() && root) {
    if (inputs.size() != 1 || static_cast<int>(inputs[0].size()) != getSize())
      sig.local_error = "on the root, scatter needs a list of one input tensor per rank";
    else
      sig.local_error = notOnDevice(inputs[0]);
    for (size_t i = 0; sig.local_error.empty() && i < inputs[0].size(); ++i)
      if (inputs[0][i].sizes() != outputs[0].sizes() || inputs[0][i].scalar_type() != outputs[0].scalar_type())
        sig.local_error = "input " + describeTensor(inputs[0][i]) + " does not match output " + describeTensor(outputs[0]);
  }
  agree(sig);
  Staging s;
  std::vector<at::Tensor> out{asBytes(writable(outputs[0], s, false))};
  std::vector<std::vector<at::Tensor>> in;
  if (root) {
    in.emplace_back();
    for (auto& t : inputs[0]) in[0].push_back(asBytes(readable(t, s)));
  }
  WorkPtr w = gloo_->scatter(out, in, opts);
  return finish("c10d::scatter_", bytesOf(outputs) * getSize(), "scatter", w, OpType::SCATTER, outputs, s.keep,
                s.steps);
}

// ---- reduce_scatter: gloo's all_reduce on a staging buffer, then this rank's chunk

WorkPtr ProcessGroupNeuron::reduceScatterComposed(const char* c10d_op, const char* op, std::vector<at::Tensor> outputs,
                                                  std::vector<at::Tensor> inputs,
                                                  const c10d::ReduceScatterOptions& opts) {
  Signature sig{op, -1, reduceCode(opts.reduceOp), inputs};
  Reduction r;
  sig.local_error = joinErrors({notOnDevice(inputs), notOnDevice(outputs)});
  if (sig.local_error.empty() && (outputs.empty() || outputs.size() != inputs.size()))
    sig.local_error = "needs one output per input";
  for (size_t i = 0; sig.local_error.empty() && i < inputs.size(); ++i) {
    if (inputs[i].numel() != outputs[i].numel() * getSize() || inputs[i].scalar_type() != outputs[i].scalar_type())
      sig.local_error = "the input must hold world_size (" + std::to_string(getSize()) +
                        ") times the output, of the same dtype: input " + describeTensor(inputs[i]) + ", output " +
                        describeTensor(outputs[i]);
    else if (inputs[i].scalar_type() != inputs[0].scalar_type())
      sig.local_error = "all tensors of a coalesced reduce_scatter must have the same dtype";
  }
  if (sig.local_error.empty()) sig.local_error = planReduction(opts.reduceOp, inputs[0].scalar_type(), r);
  agree(sig);
  Staging s;
  std::vector<at::Tensor> bufs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    // A private staging copy of the input (the caller's input stays as it
    // was), reduced whole; this rank keeps its chunk.
    const at::Tensor& in = inputs[i];
    bool complex = at::isComplexType(in.scalar_type());
    at::ScalarType staged = complex ? in.scalar_type() : *reduceDtype(in.scalar_type());
    at::Tensor tmp = at::empty({in.numel()}, in.options().dtype(staged));
    at::Tensor host = hostAlias(tmp);
    host.copy_(hostAlias(in).reshape({-1}));
    s.keep.push_back(tmp);
    at::Tensor buf = complex ? at::view_as_real(host) : host;
    if (r.premul) buf.mul_(r.factor);
    bufs.push_back(buf);
    int64_t chunk = outputs[i].numel();
    at::Tensor mine = host.narrow(0, chunk * getRank(), chunk);
    at::Tensor dst = hostAlias(outputs[i]);
    int size = getSize();
    bool average = r.average;
    s.steps.push_back([mine, dst, size, average]() mutable {
      if (average) {
        if (at::isIntegralType(mine.scalar_type(), /*includeBool=*/true))
          mine.div_(size, "trunc");
        else
          mine.div_(size);
      }
      dst.copy_(mine.view(dst.sizes()));
    });
  }
  c10d::AllreduceCoalescedOptions o;
  o.reduceOp = r.gloo_op;
  o.timeout = opts.timeout;
  WorkPtr w;
  if (bufs.size() == 1) {
    c10d::AllreduceOptions one;
    one.reduceOp = r.gloo_op;
    one.timeout = opts.timeout;
    w = gloo_->allreduce(bufs, one);
  } else {
    w = gloo_->allreduce_coalesced(bufs, o);
  }
  return finish(c10d_op, bytesOf(inputs), op, w, OpType::REDUCE_SCATTER, outputs, s.keep, s.steps);
}

WorkPtr ProcessGroupNeuron::reduce_scatter(std::vector<at::Tensor>& outputs,
                                           std::vector<std::vector<at::Tensor>>& inputs,
                                           const c10d::ReduceScatterOptions& opts) {
  // The list form: the inputs are laid end to end, as the tensor form takes them.
  std::string err = joinErrors({notOnDevice(outputs), outputs.size() == 1 && inputs.size() == 1
                                                          ? ""
                                                          : "reduce_scatter takes one output and one input list"});
  if (err.empty() && static_cast<int>(inputs[0].size()) != getSize())
    err = "the input list has " + std::to_string(inputs[0].size()) + " tensors; the group has " +
          std::to_string(getSize()) + " ranks";
  if (err.empty()) err = notOnDevice(inputs[0]);
  for (size_t i = 0; err.empty() && i < inputs[0].size(); ++i)
    if (inputs[0][i].sizes() != outputs[0].sizes() || inputs[0][i].scalar_type() != outputs[0].scalar_type())
      err = "input " + std::to_string(i) + " is " + describeTensor(inputs[0][i]) + " but the output is " +
            describeTensor(outputs[0]);
  if (!err.empty()) {
    Signature sig{"reduce_scatter", -1, reduceCode(opts.reduceOp), outputs};
    sig.local_error = err;
    agree(sig);  // raises here, and names this rank on the others
  }
  std::vector<at::Tensor> flat;
  for (auto& t : inputs[0]) flat.push_back(t.reshape({-1}));
  at::Tensor joined = at::empty({outputs[0].numel() * getSize()}, outputs[0].options());
  at::Tensor host = hostAlias(joined);
  int64_t chunk = outputs[0].numel();
  for (int i = 0; i < getSize(); ++i) host.narrow(0, chunk * i, chunk).copy_(hostAlias(inputs[0][i]).reshape({-1}));
  return reduceScatterComposed("c10d::reduce_scatter_", "reduce_scatter", outputs, {joined}, opts);
}

WorkPtr ProcessGroupNeuron::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::ReduceScatterOptions& opts) {
  return reduceScatterComposed("c10d::_reduce_scatter_base_", "reduce_scatter_tensor", {output}, {input}, opts);
}

WorkPtr ProcessGroupNeuron::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::ReduceScatterOptions& opts) {
  return reduceScatterComposed("c10d::reduce_scatter_tensor_coalesced_", "reduce_scatter_tensor_coalesced", outputs,
                               inputs, opts);
}

// ---- all_to_all --------------------------------------------------------------

WorkPtr ProcessGroupNeuron::alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                                          std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) {
  Signature sig{"all_to_all_single", -1, -1, {input}};
  sig.local_error = notOnDevice({input, output});
  int64_t rows = input.dim() > 0 ? input.size(0) : 0;
  auto even = [&](const std::vector<int64_t>& splits, int64_t n) {
    if (splits.empty()) return true;
    for (auto v : splits)
      if (v * getSize() != n) return false;
    return true;
  };
  if (sig.local_error.empty()) {
    if (input.dim() == 0 || rows % getSize() != 0)
      sig.local_error = "the input's first dimension (" + describeTensor(input) +
                        ") must divide evenly by the group size " + std::to_string(getSize());
    else if (output.numel() != input.numel() || output.scalar_type() != input.scalar_type())
      sig.local_error = "the output " + describeTensor(output) + " must match the input " + describeTensor(input);
    else if (!even(input_splits, rows) || !even(output_splits, output.size(0)))
      sig.local_error = "uneven split sizes are not supported: the neuron backend (as Trainium's) exchanges equal "
                        "splits only; pad every rank's chunks to the same size";
  }
  agree(sig);
  Staging s;
  at::Tensor in = asBytes(readable(input, s));
  at::Tensor out = asBytes(writable(output, s, false));
  std::vector<int64_t> none;
  WorkPtr w = gloo_->alltoall_base(out, in, none, none, opts);
  return finish("c10d::alltoall_base_", bytesOf(input), "all_to_all_single", w, OpType::ALLTOALL_BASE, {output},
                s.keep, s.steps);
}

WorkPtr ProcessGroupNeuron::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                     const c10d::AllToAllOptions& opts) {
  Signature sig{"all_to_all", -1, -1, inputs};
  sig.local_error = joinErrors({notOnDevice(inputs), notOnDevice(outputs)});
  if (sig.local_error.empty() &&
      (static_cast<int>(inputs.size()) != getSize() || static_cast<int>(outputs.size()) != getSize()))
    sig.local_error = "all_to_all needs one input and one output tensor per rank";
  for (size_t i = 0; sig.local_error.empty() && i < inputs.size(); ++i)
    if (inputs[i].sizes() != inputs[0].sizes() || outputs[i].sizes() != inputs[0].sizes() ||
        inputs[i].scalar_type() != inputs[0].scalar_type() || outputs[i].scalar_type() != inputs[0].scalar_type())
      sig.local_error = "tensors of different sizes are not supported: the neuron backend (as Trainium's) exchanges "
                        "equal splits only; got " + describeTensor(inputs[i]) + " and " + describeTensor(outputs[i]) +
                        " for rank " + std::to_string(i);
  agree(sig);
  // Laid end to end in two staging buffers, exchanged with gloo's all_to_all_single.
  int64_t chunk = bytesOf(inputs[0]);
  at::Tensor send = at::empty({chunk * getSize()}, inputs[0].options().dtype(at::kByte));
  at::Tensor recv = at::empty({chunk * getSize()}, inputs[0].options().dtype(at::kByte));
  at::Tensor send_h = hostAlias(send), recv_h = hostAlias(recv);
  Staging s;
  s.keep = {send, recv};
  for (int i = 0; i < getSize(); ++i) {
    at::Tensor src = inputs[i].is_contiguous() ? hostAlias(inputs[i]) : hostAlias(inputs[i]).contiguous();
    send_h.narrow(0, chunk * i, chunk).copy_(asBytes(src));
    at::Tensor piece = recv_h.narrow(0, chunk * i, chunk);
    at::Tensor dst = hostAlias(outputs[i]);
    s.steps.push_back([piece, dst]() mutable { dst.copy_(piece.view(dst.scalar_type()).view(dst.sizes())); });
  }
  std::vector<int64_t> none;
  WorkPtr w = gloo_->alltoall_base(recv_h, send_h, none, none, opts);
  return finish("c10d::alltoall_", bytesOf(inputs), "all_to_all", w, OpType::ALLTOALL, outputs, s.keep, s.steps);
}

// ---- barrier and what Trainium does not have ---------------------------------

WorkPtr ProcessGroupNeuron::barrier(const c10d::BarrierOptions& opts) {
  agree(Signature{"barrier"});
  WorkPtr w = gloo_->barrier(opts);
  return finish("c10d::barrier", 0, "barrier", w, OpType::BARRIER, {}, {}, {});
}

namespace {
[[noreturn]] void notOnTrainium(const char* what, const char* instead) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron backend: ", what,
                              " is not supported (Trainium's collective engine has no such operation; "
                              "the real neuron backend raises too). ",
                              instead);
}
}  // namespace

WorkPtr ProcessGroupNeuron::send(std::vector<at::Tensor>&, int, int) {
  notOnTrainium("send (point-to-point)", "Use a collective instead: broadcast, all_to_all_single or all_gather.");
}

WorkPtr ProcessGroupNeuron::recv(std::vector<at::Tensor>&, int, int) {
  notOnTrainium("recv (point-to-point)", "Use a collective instead: broadcast, all_to_all_single or all_gather.");
}

WorkPtr ProcessGroupNeuron::recvAnysource(std::vector<at::Tensor>&, int) {
  notOnTrainium("recv from any source", "Use a collective instead.");
}

void ProcessGroupNeuron::monitoredBarrier(const c10d::BarrierOptions&, bool) {
  notOnTrainium("monitored_barrier", "Use barrier(); a missing rank fails it after the group's timeout.");
}

}  // namespace neuron_sim::distributed
