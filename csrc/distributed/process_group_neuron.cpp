// ProcessGroupNeuron: construction, the agreement before each collective,
// recording a collective (op tracking, bytes, the device timeline), barrier
// and point-to-point. The collectives themselves: reduction_collectives.cpp,
// movement_collectives.cpp.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/process_group_neuron.h"

#include <ATen/ops/empty.h>

#include <cstring>

#include "distributed/argument_checks.h"
#include "distributed/collective_staging.h"
#include "distributed/collective_stats.h"
#include "profiler/record.h"

namespace neuron_sim::distributed {

using WorkPtr = c10::intrusive_ptr<c10d::Work>;

ProcessGroupNeuron::ProcessGroupNeuron(c10::intrusive_ptr<c10d::Backend> gloo, c10::intrusive_ptr<c10d::Store> store,
                                       int rank, int size, std::chrono::milliseconds timeout)
    : Backend(rank, size), gloo_(std::move(gloo)), exchange_(StoreExchange::create(store, rank, size, timeout)),
      timeout_(timeout),
      p2p_(gloo_, rank, size, timeout, exchange_ ? exchange_->matchTable() : nullptr,
           exchange_ ? exchange_->liveness() : std::function<std::string(int)>([](int) { return std::string(); })) {
  TORCH_CHECK(gloo_, "ProcessGroupNeuron needs a gloo backend");
}

ProcessGroupNeuron::~ProcessGroupNeuron() { abort(); }

void ProcessGroupNeuron::abort() {
  closing_.store(true);
  if (exchange_) exchange_->cancel("the process group was shut down or aborted");
}

void ProcessGroupNeuron::shutdown() { abort(); }

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupNeuron::getBackendOptions() {
  return c10::make_intrusive<Options>("neuron", timeout_);
}

void ProcessGroupNeuron::setTimeout(std::chrono::milliseconds timeout) {
  gloo_->setTimeout(timeout);
  if (exchange_) exchange_->setTimeout(timeout);
  p2p_.setTimeout(timeout);
  timeout_ = timeout;
}

std::string ProcessGroupNeuron::what(const char* op) const {
  return std::string("neuron collective ") + op + " on rank " + std::to_string(getRank());
}

std::exception_ptr ProcessGroupNeuron::exchangeFailure(const char* op) const {
  return explainFailure(what(op), messageOf(std::current_exception()), exchange_ ? exchange_->transport() : "gloo");
}

void ProcessGroupNeuron::agree(const Signature& sig) {
  std::vector<int64_t> rec = encodeSignature(sig);
  std::vector<int64_t> all;
  auto in_order = queue_.lock(/*idle=*/true);
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
    std::rethrow_exception(exchangeFailure(sig.op));
  }
  std::string error = compareSignatures(sig, all.data(), getSize(), getRank());
  if (!error.empty()) TORCH_CHECK_VALUE(false, error);
}

namespace {

std::exception_ptr disagreement(const std::string& error) {
  return std::make_exception_ptr(c10::ValueError(c10::SourceLocation{__func__, __FILE__, __LINE__}, error));
}

}  // namespace

WorkPtr ProcessGroupNeuron::issue(const Signature& sig, bool async, const char* c10d_op, uint64_t bytes,
                                  c10d::OpType type, std::vector<at::Tensor> outputs,
                                  const std::function<Prepared()>& prepare) {
  if (!async || !exchange_ || !sig.local_error.empty()) {
    agree(sig);
    Prepared p = prepare();
    WorkPtr w = p.launch();
    return finish(c10d_op, bytes, sig.op, w, type, std::move(outputs), p.staging.keep, p.staging.steps);
  }
  Prepared p = prepare();
  std::vector<int64_t> rec = encodeSignature(sig);
  auto in_order = queue_.lock(/*idle=*/false);
  const int64_t seq = exchange_->next();
  if (queue_.idle()) {
    std::vector<int64_t> all;
    bool in = false;
    try {
      in = exchange_->tryExchange(seq, rec, &all);
    } catch (...) {
      std::rethrow_exception(exchangeFailure(sig.op));
    }
    if (in) {  // every peer is here already: agreed and launched now, as agree() does
      std::string error = compareSignatures(sig, all.data(), getSize(), getRank());
      if (!error.empty()) TORCH_CHECK_VALUE(false, error);
      WorkPtr w = p.launch();
      in_order.unlock();
      return finish(c10d_op, bytes, sig.op, w, type, std::move(outputs), p.staging.keep, p.staging.steps);
    }
  }
  auto work = c10::make_intrusive<NeuronWork>(type, what(sig.op), outputs);
  queue_.post([this, work, sig, rec = std::move(rec), seq, p = std::move(p)]() mutable {
    try {
      if (closing_.load()) throw std::runtime_error("the process group was shut down or aborted");
      std::vector<int64_t> all = exchange_->exchange(seq, rec);
      std::string error = compareSignatures(sig, all.data(), getSize(), getRank());
      if (!error.empty()) return work->failed(disagreement(error));
    } catch (...) {
      return work->failed(exchangeFailure(sig.op));
    }
    WorkPtr w;
    try {
      w = p.launch();
    } catch (...) {
      return work->failed(std::current_exception());
    }
    work->launched(std::move(w), std::move(p.staging.keep), std::move(p.staging.steps));
  });
  in_order.unlock();
  record(c10d_op, bytes, sig.op, outputs);
  return work;
}

void ProcessGroupNeuron::record(const char* c10d_op, uint64_t bytes, const char* op,
                                const std::vector<at::Tensor>& outputs) {
  recordCollective(c10d_op, bytes);
  // On the simulated device timeline (docs/profiling.md): one event on the
  // tensors' device, costed as a ring of getSize() ranks over NeuronLink.
  if (C10_UNLIKELY(profiler::recording()))
    profiler::recordCollective(op, outputs.empty() ? -1 : outputs[0].device().index(), static_cast<double>(bytes),
                               getSize());
}

WorkPtr ProcessGroupNeuron::finish(const char* c10d_op, uint64_t bytes, const char* op, WorkPtr gloo_work,
                                   c10d::OpType type, std::vector<at::Tensor> outputs,
                                   std::vector<at::Tensor> keep_alive, std::vector<Finish> steps) {
  record(c10d_op, bytes, op, outputs);
  return c10::make_intrusive<NeuronWork>(std::move(gloo_work), type, what(op), std::move(outputs),
                                         std::move(keep_alive), std::move(steps));
}

WorkPtr ProcessGroupNeuron::barrier(const c10d::BarrierOptions& opts) {
  agree(Signature{"barrier"});
  WorkPtr w = gloo_->barrier(opts);
  return finish("c10d::barrier", 0, "barrier", w, c10d::OpType::BARRIER, {}, {}, {});
}

// ---- point-to-point ----------------------------------------------------------

void ProcessGroupNeuron::startPointToPoint(const char* c10d_op, const char* op, const std::vector<at::Tensor>& tensors,
                                           int peer, int tag) {
  std::string err = ArgCheck(getSize()).onDevice(tensors).one(tensors, "takes exactly one tensor").error();
  if (err.empty() && (peer < -1 || peer >= getSize() || peer == getRank()))
    err = "the peer rank " + std::to_string(peer) + " is not another rank of this group of " +
          std::to_string(getSize());
  if (err.empty() && (tag < 0 || tag >= PointToPoint::kMaxTag))
    err = "tag " + std::to_string(tag) + " is outside [0, " + std::to_string(PointToPoint::kMaxTag) +
          "); the neuron backend keeps the tags above for its own messages";
  TORCH_CHECK_VALUE(err.empty(), "neuron ", op, " on rank ", getRank(), ": ", err);
  uint64_t bytes = bytesOf(tensors[0]);
  recordCollective(c10d_op, bytes);
  // On the device timeline: one transfer of the whole tensor between two cores.
  if (C10_UNLIKELY(profiler::recording()))
    profiler::recordCollective(op, tensors[0].device().index(), static_cast<double>(bytes), 2);
}

WorkPtr ProcessGroupNeuron::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  startPointToPoint("c10d::send", "send", tensors, dst < 0 ? getSize() : dst, tag);
  return p2p_.send(tensors[0], dst, tag);
}

WorkPtr ProcessGroupNeuron::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  startPointToPoint("c10d::recv_", "recv", tensors, src < 0 ? getSize() : src, tag);
  return p2p_.recv(tensors[0], src, tag);
}

WorkPtr ProcessGroupNeuron::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  startPointToPoint("c10d::recv_any_source_", "recv", tensors, -1, tag);
  return p2p_.recv(tensors[0], -1, tag);
}

void ProcessGroupNeuron::monitoredBarrier(const c10d::BarrierOptions&, bool) {
  TORCH_CHECK_NOT_IMPLEMENTED(false,
                              "neuron backend: monitored_barrier is not supported (Trainium's collective engine has "
                              "no such operation; the real neuron backend raises too). Use barrier(); a missing rank "
                              "fails it after the group's timeout.");
}

}  // namespace neuron_sim::distributed
