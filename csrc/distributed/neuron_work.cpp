#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/neuron_work.h"

#include <ATen/core/ivalue_inl.h>
#include <c10/util/Exception.h>

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

NeuronWork::NeuronWork(c10::intrusive_ptr<c10d::Work> gloo_work, c10d::OpType type, std::string what,
                       std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep_alive,
                       std::vector<Finish> finish)
    : Work(-1, type),
      gloo_work_(std::move(gloo_work)),
      what_(std::move(what)),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                       devicesOf(outputs_))) {
  // Runs on gloo's thread when its work completes (or at once if it already
  // has). Captures by value: the user may drop this Work before completion.
  auto fut = future_;
  auto outs = outputs_;
  auto what_copy = what_;
  gloo_work_->getFuture()->addCallback(
      [fut, outs, what_copy, keep = std::move(keep_alive), finish = std::move(finish)](c10::ivalue::Future& done) {
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
      });
}

bool NeuronWork::isCompleted() { return future_->completed(); }

bool NeuronWork::isSuccess() const { return future_->completed() && !future_->hasError(); }

std::exception_ptr NeuronWork::exception() const {
  return future_->completed() && future_->hasError() ? future_->exception_ptr() : nullptr;
}

bool NeuronWork::wait(std::chrono::milliseconds timeout) {
  try {
    gloo_work_->wait(timeout);
  } catch (...) {
    std::rethrow_exception(explainFailure(what_, messageOf(std::current_exception())));
  }
  future_->wait();  // the finishing steps run in the callback, maybe just after gloo's wait returns
  if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
  return true;
}

}  // namespace neuron_sim::distributed
