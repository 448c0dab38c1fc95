#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/point_to_point.h"

#include <ATen/core/ivalue_inl.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>
#include <vector>

#include "distributed/carrier_threads.h"
#include "distributed/collective_check.h"
#include "distributed/collective_staging.h"
#include "distributed/neuron_work.h"

namespace neuron_sim::distributed {
namespace {

using WorkPtr = c10::intrusive_ptr<c10d::Work>;

// Header and ready message share one layout: a tensor's description and a number.
constexpr int kRecordSlots = 16;
// kIndex: in a header, the send's index among the sends to that peer on that
// tag; in a ready message, the number of the slot the data receive waits on.
enum Field : int { kIndex = 0, kKind, kBytes, kDtype, kNdim, kFirstDim };
constexpr int kMaxDims = kRecordSlots - kFirstDim;
enum Kind : int64_t { kHeader = 1, kReady = 2 };

// Slots above the user tags: [kMaxTag, 2 kMaxTag) ready messages, [2^30, 2^31) data.
int readySlot(int tag) { return PointToPoint::kMaxTag | tag; }
int dataSlot(int64_t n) { return (1 << 30) | static_cast<int>(n % (1 << 30)); }

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

int64_t field(const at::Tensor& rec, Field f) { return rec.data_ptr<int64_t>()[f]; }

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
  // The operation's waits on gloo, returning its error: run once, by whichever
  // thread claims it first - the caller's wait() or the thread carrying it.
  std::function<std::exception_ptr()> body;
  std::atomic<bool> claimed{false};
  std::atomic<bool> handed{false};     // to a carrier thread (once)
  bool armed = false, kicked = false;  // a recv from a named rank: body set; wanted running (Matching::mu)
  std::vector<at::Tensor> value;

  void runUnlessClaimed() {
    if (claimed.exchange(true)) return;
    // The body (holding this Completion and the tensors) goes before the waiter
    // wakes, not whenever this thread runs again: HBM accounting reads as it should.
    std::exception_ptr e = std::move(body)();
    body = nullptr;
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

// Hands `c` to a carrier thread, which runs it unless a wait() claimed it first: at
// once for an operation with a message to post on the way (a send, a recv from any
// rank); a recv from a named rank only when its Work is asked without a wait() or dropped.
void carry(const std::shared_ptr<Completion>& c) {
  if (c->handed.exchange(true)) return;
  // Weakly: a claimed one's tensors (HBM accounting) must not wait for this thread.
  runOnCarrierThread([w = std::weak_ptr<Completion>(c)] {
    if (auto c = w.lock()) c->runUnlessClaimed();
  });
}

class PointToPointWork : public c10d::Work {
 public:
  PointToPointWork(std::shared_ptr<Completion> c, c10d::OpType type, std::vector<at::Tensor> tensors)
      : Work(-1, type), c_(std::move(c)), tensors_(std::move(tensors)) {}
  // Dropped before anyone waited: a thread completes the operation (staging copies, HBM, the future).
  ~PointToPointWork() override { carryUnlessClaimed(); }

  bool isCompleted() override { return asked([&] { return c_->done; }); }
  bool isSuccess() const override { return asked([&] { return c_->done && !c_->error; }); }
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
  // An operation nobody waits on yet, asked about without waiting: a carrier thread takes it.
  void carryUnlessClaimed() const {
    if (!c_->claimed.load()) carry(c_);
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

}  // namespace

struct PointToPoint::Matching {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::pair<int, int>, int64_t> headers;  // (destination, tag): headers posted
  std::map<std::pair<int, int>, int64_t> readies;  // (source, tag): ready messages posted
  // (destination, tag): the ready receive for the next send, posted when the
  // previous send was, so that a receiver posting first finds it there and its
  // ready message is in before that send starts.
  std::map<std::pair<int, int>, std::pair<at::Tensor, WorkPtr>> next_ready;
  std::vector<int64_t> slots;                      // per source rank: data slots handed out
  // (source, tag, index): a header taken by a receive other than the one its index names.
  std::map<std::tuple<int, int, int64_t>, at::Tensor> strays;
  // (source, tag): receives from a named rank that no thread may be carrying
  // yet (their wait() or a query starts them). A recv from any rank that took
  // one's header needs it running to hand the header over.
  std::map<std::pair<int, int>, std::vector<std::weak_ptr<void>>> unstarted;  // Completions
  // Messages still posted in gloo when their operation failed: gloo keeps a raw pointer
  // to their memory, which must outlive them (only a failed operation leaves any).
  std::vector<std::pair<std::vector<WorkPtr>, std::vector<at::Tensor>>> abandoned;

  explicit Matching(int size) : slots(size, 0) {}

  // The header of this receive's message (the `index`th from `src` on `tag`), when
  // gloo handed `taken` (another index) to it: a recv from any rank took a header
  // that a receive posted later counts as its own, or the other way round.
  at::Tensor exchange(int src, int tag, const at::Tensor& taken, int64_t index, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    strays.emplace(std::make_tuple(src, tag, field(taken, kIndex)), taken);
    cv.notify_all();
    for (auto& w : unstarted[{src, tag}])
      if (auto other = std::static_pointer_cast<Completion>(w.lock())) {
        if (other->armed) carry(other);
        other->kicked = true;  // else carried as soon as its body is set
      }
    unstarted.erase({src, tag});
    auto key = std::make_tuple(src, tag, index);
    TORCH_CHECK_WITH(DistBackendError, cv.wait_for(lock, timeout, [&] { return strays.count(key) > 0; }),
                     "timed out waiting for message ", index, " on the tag, whose header another receive took");
    at::Tensor h = strays[key];
    strays.erase(key);
    return h;
  }

  void abandon(std::vector<WorkPtr> works, std::vector<at::Tensor> memory) {
    std::lock_guard<std::mutex> g(mu);
    abandoned.emplace_back(std::move(works), std::move(memory));
  }
};

PointToPoint::PointToPoint(c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size,
                           std::chrono::milliseconds timeout)
    : gloo_(std::move(gloo)), rank_(rank), timeout_(timeout), matching_(std::make_shared<Matching>(size)) {}

WorkPtr PointToPoint::send(const at::Tensor& t, int dst, int tag) {
  Staging s;
  at::Tensor data = asBytes(readable(t, s));
  std::vector<at::Tensor> header, ready;
  WorkPtr header_work, ready_work;
  {
    // Posted under the lock, so that the indices follow gloo's posting order.
    std::lock_guard<std::mutex> g(matching_->mu);
    header = {record(t, matching_->headers[{dst, tag}]++, kHeader)};
    header_work = gloo_->send(header, dst, tag);
    auto postReady = [&] {
      std::vector<at::Tensor> r{at::empty({kRecordSlots}, at::kLong)};
      WorkPtr w = gloo_->recv(r, dst, readySlot(tag));
      return std::make_pair(r[0], w);
    };
    auto& next = matching_->next_ready[{dst, tag}];
    if (!next.second) next = postReady();
    ready = {next.first};
    ready_work = std::move(next.second);
    next = postReady();
  }
  auto c = newCompletion(t);
  std::string what = "neuron send on rank " + std::to_string(rank_) + " to rank " + std::to_string(dst) + " (tag " +
                     std::to_string(tag) + ")";
  std::string missing = "rank " + std::to_string(dst) + " posted no matching recv";
  std::chrono::milliseconds timeout = timeout_.load();
  auto gloo = gloo_;
  auto m = matching_;
  int me = rank_;
  // The body holds its Completion (dropped once run): an operation nobody waits on lives until run.
  c->body = [=, self = c, keep = std::move(s.keep)]() mutable {
    std::exception_ptr err;
    WorkPtr data_work;
    std::vector<at::Tensor> payload;
    try {
      ready_work->wait(timeout);
      // Sizes differ: an empty message completes the receive, which leaves its tensor untouched.
      bool match = field(ready[0], kBytes) == data.numel();
      payload = {match ? data : at::empty({0}, at::kByte)};
      data_work = gloo->send(payload, dst, dataSlot(field(ready[0], kIndex)));
      data_work->wait(timeout);
      header_work->wait(timeout);
      if (!match) err = sizesDiffer(what, me, header[0], dst, ready[0]);
    } catch (...) {
      err = explain(what, missing, messageOf(std::current_exception()), timeout);
      m->abandon({header_work, ready_work, data_work}, {header[0], ready[0], data});
    }
    keep.clear();  // staging buffers leave HBM accounting as the send completes
    return err;
  };
  carry(c);
  return c10::make_intrusive<PointToPointWork>(c, c10d::OpType::SEND, std::vector<at::Tensor>{t});
}

WorkPtr PointToPoint::recv(const at::Tensor& t, int src, int tag) {
  Staging s;
  at::Tensor target = asBytes(writable(t, s, /*copy_in=*/false));
  std::vector<at::Tensor> header{at::empty({kRecordSlots}, at::kLong)};
  auto m = matching_;
  auto gloo = gloo_;
  // The data receive and the ready message towards `from` (and the header
  // receive, when given), under the lock so that the indices follow gloo's
  // posting order.
  struct Posted {
    int64_t index = -1;
    std::vector<at::Tensor> into, ready;
    WorkPtr data, ready_work;
  };
  auto c = newCompletion(t);
  auto post = [m, gloo, t, target, tag, w = std::weak_ptr<void>(c)](int from, Posted& p,
                                                                     std::vector<at::Tensor>* header,
                                                                     WorkPtr* header_work) {
    std::lock_guard<std::mutex> g(m->mu);
    if (header) {  // from a named rank: listed as it posts, before a recv from any rank can take its header
      *header_work = gloo->recv(*header, from, tag);
      auto& named = m->unstarted[{from, tag}];
      std::erase_if(named, [](const std::weak_ptr<void>& o) {
        auto other = std::static_pointer_cast<Completion>(o.lock());
        return !other || other->claimed.load();
      });
      named.push_back(w);
    }
    p.index = m->readies[{from, tag}]++;
    int64_t slot = m->slots[from]++;
    p.into = {target};
    p.ready = {record(t, slot, kReady)};
    p.data = gloo->recv(p.into, from, dataSlot(slot));
    p.ready_work = gloo->send(p.ready, from, readySlot(tag));
  };
  Posted posted;
  WorkPtr header_work;
  if (src >= 0) {
    // Everything up front: the data can leave the sender as soon as the ready message is in.
    post(src, posted, &header, &header_work);
  } else {
    header_work = gloo_->recvAnysource(header, tag);
  }
  std::string what = "neuron recv on rank " + std::to_string(rank_) +
                     (src >= 0 ? " from rank " + std::to_string(src) : std::string(" from any rank")) + " (tag " +
                     std::to_string(tag) + ")";
  std::string missing = src >= 0 ? "rank " + std::to_string(src) + " posted no matching send"
                                 : std::string("no rank posted a matching send");
  std::chrono::milliseconds timeout = timeout_.load();
  int me = rank_;
  c->body = [=, self = c, keep = std::move(s.keep), steps = std::move(s.steps), p = std::move(posted)]() mutable {
    std::exception_ptr err;
    int from = src;
    try {
      // From a named rank, the data first: it leaves the sender after the
      // header, so the caller waking once finds both in.
      if (from >= 0) p.data->wait(timeout);
      header_work->wait(timeout);
      if (from < 0) {
        from = header_work->sourceRank();
        {
          std::lock_guard<std::mutex> g(c->mu);
          c->source = from;
        }
        post(from, p, nullptr, nullptr);
      }
      at::Tensor h = header[0];
      if (field(h, kIndex) != p.index) h = m->exchange(from, tag, h, p.index, timeout);
      if (src < 0) p.data->wait(timeout);
      p.ready_work->wait(timeout);
      if (field(h, kBytes) == target.numel()) {
        for (const auto& step : steps) step();
      } else {
        err = sizesDiffer(what, from, h, me, p.ready[0]);
      }
    } catch (...) {
      err = explain(what, missing, messageOf(std::current_exception()), timeout);
      m->abandon({header_work, p.data, p.ready_work}, {header[0], target, p.ready.empty() ? target : p.ready[0]});
    }
    keep.clear();
    steps.clear();
    return err;
  };
  if (src < 0) {
    carry(c);
  } else {
    std::lock_guard<std::mutex> g(m->mu);
    c->armed = true;
    if (c->kicked) carry(c);
  }
  return c10::make_intrusive<PointToPointWork>(c, src >= 0 ? c10d::OpType::RECV : c10d::OpType::RECVANYSOURCE,
                                               std::vector<at::Tensor>{t});
}

void PointToPoint::setTimeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

}  // namespace neuron_sim::distributed
