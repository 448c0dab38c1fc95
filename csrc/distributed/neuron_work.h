// The Work a neuron collective returns. It wraps the gloo Work running on the
// host views of the device tensors and finishes the collective when gloo is
// done: the steps gloo does not have (AVG's division, copying a staging
// buffer back into a non-contiguous or narrow-dtype tensor, picking this
// rank's chunk of a reduce-scatter). Its future's value is the device tensors,
// which it keeps alive until then.
#pragma once
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace neuron_sim::distributed {

using Finish = std::function<void()>;

class NeuronWork : public c10d::Work {
 public:
  // `what` prefixes errors ("neuron collective all_reduce on rank 0").
  // `keep_alive` holds device buffers gloo writes (staging tensors).
  NeuronWork(c10::intrusive_ptr<c10d::Work> gloo_work, c10d::OpType type, std::string what,
             std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep_alive, std::vector<Finish> finish);
  // A collective queued for its agreement (collective_queue.h): gloo's work
  // comes later, through launched(), or the agreement's error through failed().
  NeuronWork(c10d::OpType type, std::string what, std::vector<at::Tensor> outputs);
  void launched(c10::intrusive_ptr<c10d::Work> gloo_work, std::vector<at::Tensor> keep_alive,
                std::vector<Finish> finish);
  void failed(std::exception_ptr error);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override { return outputs_; }
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  // The gloo work, once launched (or failed); wait() waits for it.
  c10::intrusive_ptr<c10d::Work> glooWork(std::chrono::milliseconds timeout);
  // Completes the future when gloo's work completes, after the finishing steps.
  void attach(const c10::intrusive_ptr<c10d::Work>& gloo_work, std::vector<at::Tensor> keep_alive,
              std::vector<Finish> finish);

  std::mutex mu_;
  std::condition_variable launched_cv_;
  bool pending_ = false;  // queued: neither launched nor failed yet
  c10::intrusive_ptr<c10d::Work> gloo_work_;
  std::string what_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// An error from gloo (timeout, peer gone) as the error the user reads:
// names the collective and rank and says what to check.
// `engine` says where `message` came from ("gloo", or "store" for the agreement exchange).
// An exception's message, without the backtrace a c10::Error carries.
std::string messageOf(std::exception_ptr e);

std::exception_ptr explainFailure(const std::string& what, const std::string& message, const char* engine = "gloo");

}  // namespace neuron_sim::distributed
