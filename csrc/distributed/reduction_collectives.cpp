// The collectives that reduce: all_reduce (and its coalesced form), reduce,
// and reduce_scatter (composed: gloo has none). Each one declares its
// argument checks, agrees with the other ranks, stages what gloo cannot take
// as it is (reduction_plan.h) and hands the host views to gloo.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <ATen/ops/empty.h>
#include <ATen/ops/view_as_real.h>

#include "aten/execution/numerics.h"
#include "aten/execution/tensor_alias.h"
#include "distributed/argument_checks.h"
#include "distributed/process_group_neuron.h"

namespace neuron_sim::distributed {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

WorkPtr ProcessGroupNeuron::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  Signature sig{"all_reduce", -1, reduceCode(opts.reduceOp), tensors};
  Reduction r;
  sig.local_error = ArgCheck(getSize()).onDevice(tensors).reduction(opts.reduceOp, tensors, r).error();
  return issue(sig, opts.asyncOp, "c10d::allreduce_", bytesOf(tensors), OpType::ALLREDUCE, tensors, [&] {
    Prepared p;
    std::vector<at::Tensor> bufs;
    for (auto& t : tensors) bufs.push_back(reducible(t, r, p.staging, /*copy_in=*/true, /*write_back=*/true, "all_reduce"));
    if (r.average)
      for (auto& b : bufs) averageFirst(b, getSize(), p.staging);
    c10d::AllreduceOptions o = opts;
    o.reduceOp = r.gloo_op;
    p.launch = [gloo = gloo_, bufs, o]() mutable {
      return bufs.size() == 1 ? gloo->allreduce(bufs, o)
                              : gloo->allreduce_coalesced(bufs, c10d::AllreduceCoalescedOptions{o});
    };
    return p;
  });
}

WorkPtr ProcessGroupNeuron::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                const c10d::AllreduceCoalescedOptions& opts) {
  Signature sig{"all_reduce_coalesced", -1, reduceCode(opts.reduceOp), tensors};
  Reduction r;
  sig.local_error = ArgCheck(getSize())
                        .onDevice(tensors)
                        .sameDtype(tensors, "all_reduce")
                        .reduction(opts.reduceOp, tensors, r)
                        .error();
  return issue(sig, opts.asyncOp, "c10d::allreduce_coalesced_", bytesOf(tensors), OpType::ALLREDUCE_COALESCED,
               tensors, [&] {
                 Prepared p;
                 std::vector<at::Tensor> bufs;
                 for (auto& t : tensors) bufs.push_back(reducible(t, r, p.staging, true, true, "all_reduce_coalesced"));
                 if (r.average)
                   for (auto& b : bufs) averageFirst(b, getSize(), p.staging);
                 c10d::AllreduceCoalescedOptions o = opts;
                 o.reduceOp = r.gloo_op;
                 p.launch = [gloo = gloo_, bufs, o]() mutable { return gloo->allreduce_coalesced(bufs, o); };
                 return p;
               });
}

WorkPtr ProcessGroupNeuron::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  Signature sig{"reduce", opts.rootRank, reduceCode(opts.reduceOp), tensors};
  Reduction r;
  sig.local_error = ArgCheck(getSize())
                        .onDevice(tensors)
                        .one(tensors, "reduce takes exactly one tensor")
                        .reduction(opts.reduceOp, tensors, r)
                        .error();
  agree(sig);
  bool root = opts.rootRank == getRank();
  Staging s;
  // Off the root the result is not defined; still, the caller's tensor is
  // left as it was when a staging buffer is used.
  at::Tensor buf = reducible(tensors[0], r, s, true, /*write_back=*/root, "reduce");
  if (r.average && root) averageFirst(buf, getSize(), s);
  c10d::ReduceOptions o = opts;
  o.reduceOp = r.gloo_op;
  std::vector<at::Tensor> bufs{buf};
  WorkPtr w = gloo_->reduce(bufs, o);
  return finish("c10d::reduce_", bytesOf(tensors), "reduce", w, OpType::REDUCE, tensors, s.keep, s.steps);
}

// ---- reduce_scatter: gloo's all_reduce on a staging buffer, then this rank's chunk

WorkPtr ProcessGroupNeuron::reduceScatterComposed(const char* c10d_op, const char* op, std::vector<at::Tensor> outputs,
                                                  std::vector<at::Tensor> inputs,
                                                  const c10d::ReduceScatterOptions& opts) {
  Signature sig{op, -1, reduceCode(opts.reduceOp), inputs};
  Reduction r;
  sig.local_error = ArgCheck(getSize())
                        .onDevice(inputs)
                        .onDevice(outputs)
                        .worldTimes(inputs, outputs, "input", "output")
                        .sameDtype(inputs, "reduce_scatter")
                        .reduction(opts.reduceOp, inputs, r)
                        .error();
  agree(sig);
  Staging s;
  std::vector<at::Tensor> bufs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    // A private staging copy of the input (the caller's input stays as it
    // was), reduced whole; this rank keeps its chunk.
    const at::Tensor& in = inputs[i];
    bool complex = at::isComplexType(in.scalar_type());
    at::ScalarType staged = complex ? in.scalar_type() : r.in_float ? at::kFloat : *reduceDtype(in.scalar_type());
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
    bool average = r.average, in_float = r.in_float;
    s.steps.push_back([mine, dst, size, average, in_float, op]() mutable {
      if (average) divideBy(mine, size);
      if (in_float) storeReduced(mine.view(dst.sizes()), dst, op);
      else dst.copy_(mine.view(dst.sizes()));
    });
  }
  WorkPtr w;
  if (bufs.size() == 1) {
    c10d::AllreduceOptions one;
    one.reduceOp = r.gloo_op;
    one.timeout = opts.timeout;
    w = gloo_->allreduce(bufs, one);
  } else {
    c10d::AllreduceCoalescedOptions o;
    o.reduceOp = r.gloo_op;
    o.timeout = opts.timeout;
    w = gloo_->allreduce_coalesced(bufs, o);
  }
  return finish(c10d_op, bytesOf(inputs), op, w, OpType::REDUCE_SCATTER, outputs, s.keep, s.steps);
}

WorkPtr ProcessGroupNeuron::reduce_scatter(std::vector<at::Tensor>& outputs,
                                           std::vector<std::vector<at::Tensor>>& inputs,
                                           const c10d::ReduceScatterOptions& opts) {
  // The list form: the inputs are laid end to end, as the tensor form takes them.
  std::string err = ArgCheck(getSize())
                        .onDevice(outputs)
                        .expect(outputs.size() == 1 && inputs.size() == 1,
                                "reduce_scatter takes one output and one input list")
                        .perRank(first(inputs).size(), "input")
                        .onDevice(first(inputs))
                        .like(first(inputs), first(outputs), "input", "output")
                        .error();
  if (!err.empty()) {
    Signature sig{"reduce_scatter", -1, reduceCode(opts.reduceOp), outputs};
    sig.local_error = err;
    agree(sig);  // raises here, and names this rank on the others
  }
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

}  // namespace neuron_sim::distributed
