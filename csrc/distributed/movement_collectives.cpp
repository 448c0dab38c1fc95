// The collectives that move bytes: broadcast, all_gather (four forms), gather,
// scatter, all_to_all. The dtype never matters to them: gloo moves the device
// bytes as uint8 host views (collective_staging.h).
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <ATen/ops/empty.h>

#include "aten/execution/tensor_alias.h"
#include "distributed/argument_checks.h"
#include "distributed/process_group_neuron.h"

namespace neuron_sim::distributed {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

WorkPtr ProcessGroupNeuron::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  Signature sig{"broadcast", opts.rootRank, -1, tensors};
  sig.local_error = ArgCheck(getSize()).onDevice(tensors).one(tensors, "broadcast takes exactly one tensor").error();
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
  sig.local_error = ArgCheck(getSize())
                        .onDevice(inputs)
                        .expect(inputs.size() == 1 && outputs.size() == 1,
                                "all_gather takes one input tensor and one output list")
                        .perRank(first(outputs).size(), "output")
                        .onDevice(first(outputs))
                        .like(first(outputs), first(inputs), "output", "input")
                        .error();
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
  sig.local_error =
      ArgCheck(getSize()).onDevice({input, output}).worldTimes({output}, {input}, "output", "input").error();
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
  ArgCheck check(getSize());
  check.onDevice(inputs).expect(static_cast<int>(outputs.size()) == getSize(),
                                "all_gather_coalesced needs one output list per rank");
  for (const auto& list : outputs) {
    check.expect(list.size() == inputs.size(), "each output list must hold one tensor per input").onDevice(list);
    for (size_t i = 0; i < list.size() && i < inputs.size(); ++i) check.like({list[i]}, inputs[i], "output", "input");
  }
  sig.local_error = check.error();
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
  sig.local_error =
      ArgCheck(getSize()).onDevice(inputs).onDevice(outputs).worldTimes(outputs, inputs, "output", "input").error();
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

// ---- gather / scatter: the list of one tensor per rank exists on the root only

WorkPtr ProcessGroupNeuron::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                   const c10d::GatherOptions& opts) {
  Signature sig{"gather", opts.rootRank, -1, inputs};
  bool root = opts.rootRank == getRank();
  ArgCheck check(getSize());
  check.onDevice(inputs).one(inputs, "gather takes exactly one input");
  if (root)
    check.expect(outputs.size() == 1, "on the root, gather needs a list of one output tensor per rank")
        .perRank(first(outputs).size(), "output")
        .onDevice(first(outputs))
        .like(first(outputs), first(inputs), "output", "input");
  sig.local_error = check.error();
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
  ArgCheck check(getSize());
  check.onDevice(outputs).one(outputs, "scatter takes exactly one output");
  if (root)
    check.expect(inputs.size() == 1, "on the root, scatter needs a list of one input tensor per rank")
        .perRank(first(inputs).size(), "input")
        .onDevice(first(inputs))
        .like(first(inputs), first(outputs), "input", "output");
  sig.local_error = check.error();
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

// ---- all_to_all: equal splits only, as Trainium's collective engine ----------

WorkPtr ProcessGroupNeuron::alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                                          std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) {
  Signature sig{"all_to_all_single", -1, -1, {input}};
  auto even = [&](const std::vector<int64_t>& splits, int64_t n) {
    for (auto v : splits)
      if (v * getSize() != n) return false;
    return true;
  };
  ArgCheck check(getSize());
  check.onDevice({input, output});
  if (check.ok()) {
    int64_t rows = input.dim() > 0 ? input.size(0) : 0;
    if (input.dim() == 0 || rows % getSize() != 0)
      check.fail("the input's first dimension (" + describeTensor(input) + ") must divide evenly by the group size " +
                 std::to_string(getSize()));
    else if (output.numel() != input.numel() || output.scalar_type() != input.scalar_type())
      check.fail("the output " + describeTensor(output) + " must match the input " + describeTensor(input));
    else
      check.expect(even(input_splits, rows) && even(output_splits, output.size(0)),
                   "uneven split sizes are not supported: the neuron backend (as Trainium's) exchanges equal "
                   "splits only; pad every rank's chunks to the same size");
  }
  sig.local_error = check.error();
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
  sig.local_error = ArgCheck(getSize())
                        .onDevice(inputs)
                        .onDevice(outputs)
                        .perRank(inputs.size(), "input")
                        .perRank(outputs.size(), "output")
                        .like(inputs, first(inputs), "input", "first input")
                        .like(outputs, first(inputs), "output", "first input")
                        .error();
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

}  // namespace neuron_sim::distributed
