#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/point_to_point.h"

#include <ATen/core/ivalue_inl.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <condition_variable>
#include <sstream>
#include <thread>

#include "distributed/collective_check.h"
#include "distributed/collective_staging.h"
#include "distributed/neuron_work.h"

namespace neuron_sim::distributed {
namespace {

using WorkPtr = c10::intrusive_ptr<c10d::Work>;

// Header and answer share one layout: a tensor's description and a status.
constexpr int kRecordSlots = 16;
enum Slot : int { kSeq = 0, kStatus, kBytes, kDtype, kNdim, kFirstDim };
constexpr int kMaxDims = kRecordSlots - kFirstDim;
enum Status : int64_t { kHeader = 1, kSizesMatch = 2, kSizesDiffer = 3 };

int dataSlot(int64_t seq) { return (1 << 30) | static_cast<int>(seq % PointToPoint::kMaxTag); }
int answerSlot(int64_t seq) { return (1 << 30) | PointToPoint::kMaxTag | static_cast<int>(seq % PointToPoint::kMaxTag); }

at::Tensor record(const at::Tensor& t, int64_t seq, int64_t status) {
  at::Tensor r = at::zeros({kRecordSlots}, at::kLong);
  int64_t* p = r.data_ptr<int64_t>();
  p[kSeq] = seq;
  p[kStatus] = status;
  p[kBytes] = static_cast<int64_t>(bytesOf(t));
  p[kDtype] = static_cast<int64_t>(t.scalar_type());
  p[kNdim] = t.dim();
  for (int64_t d = 0; d < std::min<int64_t>(t.dim(), kMaxDims); ++d) p[kFirstDim + d] = t.size(d);
  return r;
}

// "float32[4, 3] (48 bytes)", from a record.
std::string describe(const at::Tensor& rec) {
  const int64_t* p = rec.data_ptr<int64_t>();
  std::ostringstream os;
  os << dtypeName(static_cast<at::ScalarType>(p[kDtype])) << "[";
  for (int64_t d = 0; d < p[kNdim]; ++d) os << (d ? ", " : "") << (d < kMaxDims ? std::to_string(p[kFirstDim + d]) : "...");
  os << "] (" << p[kBytes] << " bytes)";
  return os.str();
}

// A gloo failure as the user reads it: which operation, which peer and tag, and why.
std::exception_ptr explain(const std::string& what, const std::string& missing, const std::string& gloo_message,
                           std::chrono::milliseconds timeout) {
  std::string msg = what + " failed: ";
  const std::string& g = gloo_message;
  if (g.find("imed out") != std::string::npos || g.find("imeout") != std::string::npos)
    msg += missing + " within the group's timeout (" + std::to_string(timeout.count()) +
           " ms): the peer is missing or stuck, or used another tag; ";
  else if (g.find("losed") != std::string::npos || g.find("reset") != std::string::npos ||
           g.find("Broken pipe") != std::string::npos)
    msg += "the peer closed its connection (it exited or crashed); ";
  msg += "gloo: " + g;
  return std::make_exception_ptr(c10::DistBackendError(c10::SourceLocation{__func__, __FILE__, __LINE__}, msg));
}

// One operation's completion, shared by its Work and the thread carrying it.
struct Completion {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  int source = -1;
  c10::intrusive_ptr<c10::ivalue::Future> future;

  void finish(std::exception_ptr e, const std::vector<at::Tensor>& value) {
    {
      std::lock_guard<std::mutex> g(mu);
      done = true;
      error = e;
    }
    cv.notify_all();
    if (e)
      future->setError(e);
    else
      future->markCompleted(c10::IValue(value));
  }
};

class PointToPointWork : public c10d::Work {
 public:
  PointToPointWork(std::shared_ptr<Completion> c, c10d::OpType type, std::vector<at::Tensor> tensors)
      : Work(-1, type), c_(std::move(c)), tensors_(std::move(tensors)) {}

  bool isCompleted() override {
    std::lock_guard<std::mutex> g(c_->mu);
    return c_->done;
  }
  bool isSuccess() const override {
    std::lock_guard<std::mutex> g(c_->mu);
    return c_->done && !c_->error;
  }
  std::exception_ptr exception() const override {
    std::lock_guard<std::mutex> g(c_->mu);
    return c_->error;
  }
  int sourceRank() const override {
    std::lock_guard<std::mutex> g(c_->mu);
    return c_->source;
  }
  std::vector<at::Tensor> result() override { return tensors_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return c_->future; }

  // Every message of the operation is bounded by the group's timeout, so the
  // thread always completes it; `timeout` only shortens the wait here.
  bool wait(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(c_->mu);
    auto ready = [&] { return c_->done; };
    if (timeout == kNoTimeout)
      c_->cv.wait(lock, ready);
    else
      TORCH_CHECK_WITH(DistBackendError, c_->cv.wait_for(lock, timeout, ready),
                       "neuron point-to-point operation did not complete within wait()'s timeout of ",
                       timeout.count(), " ms");
    if (c_->error) std::rethrow_exception(c_->error);
    return true;
  }

 private:
  std::shared_ptr<Completion> c_;
  std::vector<at::Tensor> tensors_;
};

std::shared_ptr<Completion> newCompletion(const at::Tensor& t) {
  auto c = std::make_shared<Completion>();
  c->future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                       std::vector<c10::Device>{t.device()});
  return c;
}

std::string sizesDiffer(const std::string& what, int sender, const std::string& sent, int receiver,
                        const std::string& into) {
  return what + ": the message and the receive buffer differ in size: rank " + std::to_string(sender) + " sent " +
         sent + "; rank " + std::to_string(receiver) + " receives into " + into +
         ". A send and its matching recv need tensors of the same number of bytes";
}

}  // namespace

PointToPoint::PointToPoint(c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size,
                           std::chrono::milliseconds timeout)
    : gloo_(std::move(gloo)), rank_(rank), size_(size), timeout_(timeout), next_seq_(size, 0) {}

WorkPtr PointToPoint::send(const at::Tensor& t, int dst, int tag) {
  int64_t seq;
  {
    std::lock_guard<std::mutex> g(mutex_);
    seq = next_seq_[dst]++;
  }
  Staging s;
  at::Tensor data = asBytes(readable(t, s));
  std::vector<at::Tensor> header{record(t, seq, kHeader)}, answer{at::zeros({kRecordSlots}, at::kLong)},
      payload{data};
  // Posted here, in the caller's order: gloo matches headers of one (peer, tag) in posting order.
  WorkPtr header_work = gloo_->send(header, dst, tag);
  WorkPtr answer_work = gloo_->recv(answer, dst, answerSlot(seq));
  WorkPtr data_work = gloo_->send(payload, dst, dataSlot(seq));
  auto c = newCompletion(t);
  std::string what = "neuron send on rank " + std::to_string(rank_) + " to rank " + std::to_string(dst) + " (tag " +
                     std::to_string(tag) + ")";
  std::string missing = "rank " + std::to_string(dst) + " posted no matching recv";
  std::chrono::milliseconds timeout = timeout_.load();
  int me = rank_;
  std::thread([=, keep = std::move(s.keep)]() mutable {
    std::exception_ptr err;
    try {
      header_work->wait(timeout);
      answer_work->wait(timeout);
      data_work->wait(timeout);  // the receiver takes the data even when the sizes differ
      if (answer[0].data_ptr<int64_t>()[kStatus] != kSizesMatch)
        err = std::make_exception_ptr(c10::ValueError(c10::SourceLocation{__func__, __FILE__, __LINE__},
                                                      sizesDiffer(what, me, describe(header[0]), dst,
                                                                  describe(answer[0]))));
    } catch (...) {
      err = explain(what, missing, messageOf(std::current_exception()), timeout);
    }
    keep.clear();  // staging buffers leave HBM accounting as the send completes
    c->finish(err, {t});
  }).detach();
  return c10::make_intrusive<PointToPointWork>(c, c10d::OpType::SEND, std::vector<at::Tensor>{t});
}

WorkPtr PointToPoint::recv(const at::Tensor& t, int src, int tag) {
  Staging s;
  at::Tensor target = asBytes(writable(t, s, /*copy_in=*/false));
  std::vector<at::Tensor> header{at::zeros({kRecordSlots}, at::kLong)};
  WorkPtr header_work = src >= 0 ? gloo_->recv(header, src, tag) : gloo_->recvAnysource(header, tag);
  auto c = newCompletion(t);
  std::string what = "neuron recv on rank " + std::to_string(rank_) +
                     (src >= 0 ? " from rank " + std::to_string(src) : std::string(" from any rank")) + " (tag " +
                     std::to_string(tag) + ")";
  std::string missing = src >= 0 ? "rank " + std::to_string(src) + " posted no matching send"
                                 : std::string("no rank posted a matching send");
  std::chrono::milliseconds timeout = timeout_.load();
  auto gloo = gloo_;
  int me = rank_;
  std::thread([=, keep = std::move(s.keep), steps = std::move(s.steps)]() mutable {
    std::exception_ptr err;
    int from = src;
    try {
      header_work->wait(timeout);
      if (from < 0) from = header_work->sourceRank();
      {
        std::lock_guard<std::mutex> g(c->mu);
        c->source = from;
      }
      const int64_t* h = header[0].data_ptr<int64_t>();
      int64_t seq = h[kSeq];
      bool match = h[kBytes] == target.numel();
      // Sizes differ: the message is taken into scratch memory and dropped, so the tag stays usable.
      std::vector<at::Tensor> into{match ? target : at::empty({h[kBytes]}, at::kByte)};
      std::vector<at::Tensor> answer{record(t, seq, match ? kSizesMatch : kSizesDiffer)};
      WorkPtr data_work = gloo->recv(into, from, dataSlot(seq));
      WorkPtr answer_work = gloo->send(answer, from, answerSlot(seq));
      data_work->wait(timeout);
      answer_work->wait(timeout);
      if (match) {
        for (const auto& step : steps) step();
      } else {
        err = std::make_exception_ptr(c10::ValueError(c10::SourceLocation{__func__, __FILE__, __LINE__},
                                                      sizesDiffer(what, from, describe(header[0]), me,
                                                                  describe(answer[0]))));
      }
    } catch (...) {
      err = explain(what, missing, messageOf(std::current_exception()), timeout);
    }
    keep.clear();
    steps.clear();
    c->finish(err, {t});
  }).detach();
  return c10::make_intrusive<PointToPointWork>(c, src >= 0 ? c10d::OpType::RECV : c10d::OpType::RECVANYSOURCE,
                                               std::vector<at::Tensor>{t});
}

void PointToPoint::setTimeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

}  // namespace neuron_sim::distributed
