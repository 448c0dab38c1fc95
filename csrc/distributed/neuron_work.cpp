#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/neuron_work.h"

#include <ATen/core/ivalue_inl.h>
#include <c10/util/Exception.h>

#include "distributed/carrier_threads.h"
#include "distributed/collective_queue.h"

namespace neuron_sim::distributed {

std::exception_ptr explainFailure(const std::string& what, const std::string& message, const char* engine) {
  std::string msg = what + " failed: ";
  bool timeout = message.find("imed out") != std::string::npos || message.find("imeout") != std::string::npos;
  bool closed = message.find("losed") != std::string::npos || message.find("reset") != std::string::npos ||
                message.find("Broken pipe") != std::string::npos || message.find("exited") != std::string::npos;
  if (timeout)
    msg += "not every rank of the group reached this collective within the group's timeout (a rank is missing, "
           "stuck, or issued different collectives); ";
  else if (closed)
    msg += "a peer rank closed its connection (it exited or crashed); ";
  msg += std::string(engine) + ": " + message;
  return std::make_exception_ptr(c10::DistBackendError(c10::SourceLocation{__func__, __FILE__, __LINE__}, msg));
}

namespace {

std::vector<c10::Device> devicesOf(const std::vector<at::Tensor>& ts) {
  std::vector<c10::Device> out;
  for (const auto& t : ts)
    if (!t.device().is_cpu() && std::find(out.begin(), out.end(), t.device()) == out.end()) out.push_back(t.device());
  return out;
}

}  // namespace

std::string messageOf(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const c10::Error& err) {
    return err.what_without_backtrace();
  } catch (const std::exception& err) {
    return err.what();
  } catch (...) {
    return "unknown error";
  }
}

NeuronWork::NeuronWork(c10d::OpType type, std::string what, std::vector<at::Tensor> outputs)
    : Work(-1, type),
      pending_(true),
      what_(std::move(what)),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                       devicesOf(outputs_))) {}

NeuronWork::NeuronWork(c10::intrusive_ptr<c10d::Work> gloo_work, c10d::OpType type, std::string what,
                       std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep_alive,
                       std::vector<Finish> finish)
    : NeuronWork(type, std::move(what), std::move(outputs)) {
  pending_ = false;
  gloo_work_ = std::move(gloo_work);
  attach(gloo_work_, std::move(keep_alive), std::move(finish));
}

void NeuronWork::attach(const c10::intrusive_ptr<c10d::Work>& gloo_work, std::vector<at::Tensor> keep_alive,
                        std::vector<Finish> finish) {
  // Runs on gloo's thread when its work completes (or at once if it already
  // has). Captures by value: the user may drop this Work before completion.
  auto fut = future_;
  auto outs = outputs_;
  auto what_copy = what_;
  auto complete = [fut, outs, what_copy, keep = std::move(keep_alive),
                   finish = std::move(finish)](c10::ivalue::Future& done) {
    if (done.hasError()) {
      fut->setError(explainFailure(what_copy, messageOf(done.exception_ptr())));
      return;
    }
    try {
      for (const auto& step : finish) step();
    } catch (...) {
      fut->setError(std::current_exception());
      return;
    }
    fut->markCompleted(c10::IValue(outs));
  };
  gloo_work->getFuture()->addCallback([complete = std::move(complete)](c10::ivalue::Future& done) mutable {
    // gloo already done when the queue's worker attached: the user's callbacks
    // run elsewhere (collective_queue.h).
    if (!CollectiveQueue::onWorker()) return complete(done);
    auto d = c10::intrusive_ptr<c10::ivalue::Future>::reclaim_copy(&done);
    runOnCarrierThread([complete = std::move(complete), d]() mutable { complete(*d); });
  });
}

void NeuronWork::launched(c10::intrusive_ptr<c10d::Work> gloo_work, std::vector<at::Tensor> keep_alive,
                          std::vector<Finish> finish) {
  {
    std::lock_guard<std::mutex> g(mu_);
    gloo_work_ = gloo_work;
    pending_ = false;
  }
  launched_cv_.notify_all();
  attach(gloo_work, std::move(keep_alive), std::move(finish));
}

void NeuronWork::failed(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> g(mu_);
    pending_ = false;
  }
  launched_cv_.notify_all();
  auto fut = future_;
  if (CollectiveQueue::onWorker())
    runOnCarrierThread([fut, error] { fut->setError(error); });
  else
    fut->setError(error);
}

c10::intrusive_ptr<c10d::Work> NeuronWork::glooWork(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> l(mu_);
  if (!pending_) return gloo_work_;
  if (timeout == kNoTimeout) {
    launched_cv_.wait(l, [this] { return !pending_; });
  } else if (!launched_cv_.wait_for(l, timeout, [this] { return !pending_; })) {
    std::rethrow_exception(explainFailure(what_, "Timed out after " + std::to_string(timeout.count()) +
                                                     " ms waiting for the ranks to agree on the collective",
                                          "neuron"));
  }
  return gloo_work_;
}

bool NeuronWork::isCompleted() { return future_->completed(); }

bool NeuronWork::isSuccess() const { return future_->completed() && !future_->hasError(); }

std::exception_ptr NeuronWork::exception() const {
  return future_->completed() && future_->hasError() ? future_->exception_ptr() : nullptr;
}

bool NeuronWork::wait(std::chrono::milliseconds timeout) {
  auto gloo_work = glooWork(timeout);
  try {
    if (gloo_work) gloo_work->wait(timeout);  // none: the agreement failed, the future holds why
  } catch (...) {
    std::rethrow_exception(explainFailure(what_, messageOf(std::current_exception())));
  }
  future_->wait();  // the finishing steps run in the callback, maybe just after gloo's wait returns
  if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
  return true;
}

}  // namespace neuron_sim::distributed
