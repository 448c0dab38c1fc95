// ProcessGroupNeuron: the c10d backend behind dist.init_process_group("neuron").
//
// The real backend drives Trainium's collective engine; here every collective
// runs on gloo, an existing engine, over host views of the device tensors:
// arena memory is host memory, so gloo reads and writes the device bytes in
// place (no copy). What gloo lacks is composed around it (AVG, PREMUL_SUM,
// reduce-scatter, dtypes it does not know); monitored_barrier, which the
// real backend lacks, raises an error that says so. Before each collective
// the ranks compare what they are about to do (collective_check.h), through
// shared memory or the group's store (store_exchange.h), so mismatches are
// errors, never an abort or a hang; an async all_reduce whose peers are not
// there yet is agreed on and launched by the group's worker (collective_queue.h). Point-to-point runs on gloo's send/recv
// with the sizes checked before the data leaves (point_to_point.h).
//
// The members are defined by job: this file's .cpp (construction, the
// agreement, recording, barrier, point-to-point), reduction_collectives.cpp
// (all_reduce, reduce, reduce_scatter), movement_collectives.cpp (broadcast,
// all_gather, gather, scatter, all_to_all).
#pragma once
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/collective_check.h"
#include "distributed/collective_queue.h"
#include "distributed/collective_staging.h"
#include "distributed/neuron_work.h"
#include "distributed/point_to_point.h"
#include "distributed/store_exchange.h"

namespace neuron_sim::distributed {

// Hidden as pybind11's own types are: the class is bound to Python by this
// module only, and a visible class inside a hidden pybind11::class_ draws
// gcc's -Wattributes warning.
class __attribute__((visibility("hidden"))) ProcessGroupNeuron : public c10d::Backend {
 public:
  // `gloo` is a ProcessGroupGloo created by the Python factory on the same
  // store, rank and size (gloo's headers are not shipped with torch, so it is
  // built in Python and driven here through the c10d::Backend interface).
  // `store` is the group's store, which carries the agreement exchange.
  ProcessGroupNeuron(c10::intrusive_ptr<c10d::Backend> gloo, c10::intrusive_ptr<c10d::Store> store, int rank,
                     int size, std::chrono::milliseconds timeout);
  ~ProcessGroupNeuron() override;
  // Collectives still queued for their agreement fail with an error saying so.
  void shutdown() override;
  void abort() override;

  const std::string getBackendName() const override { return "neuron"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  void setTimeout(std::chrono::milliseconds timeout) override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  // Not on Trainium: the real backend has no monitored barrier.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

 private:
  // Exchanges `sig` with every rank; raises the same error on all of them
  // when they disagree (or when this rank's arguments were invalid). Waits
  // first for the collectives queued before it (collective_queue.h).
  void agree(const Signature& sig);
  // What a collective hands to gloo once the ranks agree: its staging, made
  // on the issuing thread, and the call to gloo.
  struct Prepared {
    Staging staging;
    std::function<c10::intrusive_ptr<c10d::Work>()> launch;
  };
  // Agrees, prepares and launches a collective, as agree() does, when it is
  // synchronous (the caller waits for it anyway) or this rank rejected its
  // arguments (raised at the call). An async one is launched at once when
  // every peer's record is in already, else queued: the agreement's error
  // then surfaces at wait() or in the future, with the same message.
  c10::intrusive_ptr<c10d::Work> issue(const Signature& sig, bool async, const char* c10d_op, uint64_t bytes,
                                       c10d::OpType type, std::vector<at::Tensor> outputs,
                                       const std::function<Prepared()>& prepare);
  // The agreement exchange's failure (timeout, a peer gone) as the user reads it.
  std::exception_ptr exchangeFailure(const char* op) const;
  // Records a collective as issued: op tracking, bytes, report, the device timeline.
  void record(const char* c10d_op, uint64_t bytes, const char* op, const std::vector<at::Tensor>& outputs);
  // Records the collective (op tracking, bytes, report) and wraps gloo's work.
  c10::intrusive_ptr<c10d::Work> finish(const char* c10d_op, uint64_t bytes, const char* op,
                                        c10::intrusive_ptr<c10d::Work> gloo_work, c10d::OpType type,
                                        std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep_alive,
                                        std::vector<Finish> steps);
  std::string what(const char* op) const;
  // Checks a send's or recv's arguments (raises here: p2p has no agreement
  // exchange) and records it like a collective.
  void startPointToPoint(const char* c10d_op, const char* op, const std::vector<at::Tensor>& tensors, int peer,
                         int tag);
  c10::intrusive_ptr<c10d::Work> reduceScatterComposed(const char* c10d_op, const char* op,
                                                       std::vector<at::Tensor> outputs,
                                                       std::vector<at::Tensor> inputs,
                                                       const c10d::ReduceScatterOptions& opts);

  c10::intrusive_ptr<c10d::Backend> gloo_;
  std::unique_ptr<StoreExchange> exchange_;  // null: the store has no queues, agree over gloo
  std::chrono::milliseconds timeout_;
  PointToPoint p2p_;
  std::atomic<bool> closing_{false};  // shut down or aborted: queued collectives fail at once
  CollectiveQueue queue_;  // last: its worker, which uses the members above, ends first
};

}  // namespace neuron_sim::distributed
