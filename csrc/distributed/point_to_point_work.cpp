#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/point_to_point_work.h"

#include <ATen/core/ivalue_inl.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <cstring>
#include <sstream>

#include "distributed/carrier_threads.h"
#include "distributed/collective_check.h"
#include "distributed/collective_staging.h"

namespace neuron_sim::distributed::p2p {

constexpr int kMaxDims = kRecordSlots - kFirstDim;

at::Tensor record(const at::Tensor& t, int64_t index, int64_t kind) {
  at::Tensor r = at::zeros({kRecordSlots}, at::kLong);
  int64_t* p = r.data_ptr<int64_t>();
  p[kIndex] = index;
  p[kKind] = kind;
  p[kBytes] = static_cast<int64_t>(bytesOf(t));
  p[kDtype] = static_cast<int64_t>(t.scalar_type());
  p[kNdim] = t.dim();
  for (int64_t d = 0; d < std::min<int64_t>(t.dim(), kMaxDims); ++d) p[kFirstDim + d] = t.size(d);
  return r;
}

at::Tensor recordFrom(const int64_t* words) {
  at::Tensor r = at::empty({kRecordSlots}, at::kLong);
  std::memcpy(r.data_ptr<int64_t>(), words, kRecordSlots * sizeof(int64_t));
  return r;
}

int64_t field(const at::Tensor& rec, Field f) { return rec.data_ptr<int64_t>()[f]; }

std::string describe(const at::Tensor& rec) {
  const int64_t* p = rec.data_ptr<int64_t>();
  std::ostringstream os;
  os << dtypeName(static_cast<at::ScalarType>(p[kDtype])) << "[";
  for (int64_t d = 0; d < p[kNdim]; ++d) os << (d ? ", " : "") << (d < kMaxDims ? std::to_string(p[kFirstDim + d]) : "...");
  os << "] (" << p[kBytes] << " bytes)";
  return os.str();
}

std::string sendWhat(int rank, int dst, int tag) {
  return "neuron send on rank " + std::to_string(rank) + " to rank " + std::to_string(dst) + " (tag " +
         std::to_string(tag) + ")";
}

std::string sendMissing(int dst) { return "rank " + std::to_string(dst) + " posted no matching recv"; }

std::string recvWhat(int rank, int src, int tag) {
  return "neuron recv on rank " + std::to_string(rank) +
         (src >= 0 ? " from rank " + std::to_string(src) : std::string(" from any rank")) + " (tag " +
         std::to_string(tag) + ")";
}

std::string recvMissing(int src) {
  return src >= 0 ? "rank " + std::to_string(src) + " posted no matching send"
                  : std::string("no rank posted a matching send");
}

std::exception_ptr explain(const std::string& what, const std::string& missing, const std::string& message,
                           std::chrono::milliseconds timeout, const char* engine) {
  std::string msg = what + " failed: ";
  const std::string& g = message;
  if (g.find("imed out") != std::string::npos || g.find("imeout") != std::string::npos)
    msg += missing + " within the group's timeout (" + std::to_string(timeout.count()) +
           " ms): the peer is missing or stuck, or used another tag; ";
  else if (g.find("losed") != std::string::npos || g.find("reset") != std::string::npos ||
           g.find("Broken pipe") != std::string::npos || g.find("has exited") != std::string::npos)
    msg += "the peer closed its connection (it exited or crashed); ";
  msg += std::string(engine) + ": " + g;
  return std::make_exception_ptr(c10::DistBackendError(c10::SourceLocation{__func__, __FILE__, __LINE__}, msg));
}

namespace {

// Moves `c` from `from` to `to`: false when another thread moved it first or it is elsewhere.
bool step(Completion& c, Stage from, Stage to) { return c.stage.compare_exchange_strong(from, to); }

void handOver(const std::shared_ptr<Completion>& c) {
  // Weakly: a claimed one's tensors (HBM accounting) must not wait for this thread.
  runOnCarrierThread([w = std::weak_ptr<Completion>(c)] {
    if (auto c = w.lock()) c->runUnlessClaimed();
  });
}

}  // namespace

void arm(const std::shared_ptr<Completion>& c) {
  if (step(*c, Stage::kPosting, Stage::kReady)) return;
  // Asked to run before now (kWanted): straight to a carrier thread.
  c->stage.store(Stage::kCarried);
  handOver(c);
}

void Completion::runUnlessClaimed() {
  if (!step(*this, Stage::kReady, Stage::kRunning) && !step(*this, Stage::kCarried, Stage::kRunning)) return;
  // The body (holding this Completion and the tensors) goes before the waiter
  // wakes, not whenever this thread runs again: HBM accounting reads as it should.
  std::exception_ptr e = std::move(body)();
  body = nullptr;
  {
    std::lock_guard<std::mutex> g(mu);
    stage.store(Stage::kDone);
    error = e;
  }
  cv.notify_all();
  if (e)
    future->setError(e);
  else
    future->markCompleted(c10::IValue(value));
}

void carry(const std::shared_ptr<Completion>& c) {
  if (step(*c, Stage::kPosting, Stage::kWanted)) return;  // arm() hands it over
  if (step(*c, Stage::kReady, Stage::kCarried)) handOver(c);
}

namespace {

class PointToPointWork : public c10d::Work {
 public:
  PointToPointWork(std::shared_ptr<Completion> c, c10d::OpType type, std::vector<at::Tensor> tensors)
      : Work(-1, type), c_(std::move(c)), tensors_(std::move(tensors)) {}
  // Dropped before anyone waited: a thread completes the operation (staging copies, HBM, the future).
  ~PointToPointWork() override { carryUnlessClaimed(); }

  bool isCompleted() override { return asked([&] { return c_->done(); }); }
  bool isSuccess() const override { return asked([&] { return c_->done() && !c_->error; }); }
  std::exception_ptr exception() const override { return asked([&] { return c_->error; }); }
  int sourceRank() const override { return asked([&] { return c_->source; }); }
  std::vector<at::Tensor> result() override { return tensors_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    carryUnlessClaimed();
    return c_->future;
  }

  // Every message of the operation is bounded by the group's timeout, so the
  // thread always completes it; `timeout` only shortens the wait here.
  bool wait(std::chrono::milliseconds timeout) override {
    // The caller's own thread waits on gloo when it comes first: no thread
    // wake-up between the message's arrival and the caller.
    if (timeout == kNoTimeout)
      c_->runUnlessClaimed();
    else
      carryUnlessClaimed();
    std::unique_lock<std::mutex> lock(c_->mu);
    auto ready = [&] { return c_->done(); };
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
  // An operation nobody waits on yet, asked about without waiting: a carrier thread takes it.
  void carryUnlessClaimed() const {
    if (!c_->claimed()) carry(c_);
  }
  template <class F>
  std::invoke_result_t<F> asked(F read) const {
    carryUnlessClaimed();
    std::lock_guard<std::mutex> g(c_->mu);
    return read();
  }

  std::shared_ptr<Completion> c_;
  std::vector<at::Tensor> tensors_;
};

}  // namespace

std::shared_ptr<Completion> newCompletion(const at::Tensor& t) {
  auto c = std::make_shared<Completion>();
  c->future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                       std::vector<c10::Device>{t.device()});
  c->value = {t};
  return c;
}

std::exception_ptr sizesDiffer(const std::string& what, int sender, const at::Tensor& header, int receiver,
                               const at::Tensor& ready) {
  return std::make_exception_ptr(c10::ValueError(
      c10::SourceLocation{__func__, __FILE__, __LINE__},
      what + ": the message and the receive buffer differ in size: rank " + std::to_string(sender) + " sent " +
          describe(header) + "; rank " + std::to_string(receiver) + " receives into " + describe(ready) +
          ". A send and its matching recv need tensors of the same number of bytes"));
}

void abandon(std::vector<c10::intrusive_ptr<c10d::Work>> works, std::vector<at::Tensor> memory) {
  static std::mutex mu;
  // Never destroyed: tensors freed at static destruction would reach a device already gone.
  static auto* kept = new std::vector<std::pair<std::vector<c10::intrusive_ptr<c10d::Work>>, std::vector<at::Tensor>>>;
  std::lock_guard<std::mutex> g(mu);
  kept->emplace_back(std::move(works), std::move(memory));
}

c10::intrusive_ptr<c10d::Work> newWork(std::shared_ptr<Completion> c, c10d::OpType type, const at::Tensor& t) {
  return c10::make_intrusive<PointToPointWork>(std::move(c), type, std::vector<at::Tensor>{t});
}

}  // namespace neuron_sim::distributed::p2p
