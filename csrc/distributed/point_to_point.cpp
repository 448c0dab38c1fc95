#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/point_to_point.h"

#include <ATen/ops/empty.h>

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "distributed/collective_staging.h"
#include "distributed/neuron_work.h"
#include "distributed/point_to_point_work.h"

namespace neuron_sim::distributed {
namespace {

using WorkPtr = c10::intrusive_ptr<c10d::Work>;

using namespace p2p;

// Slots above the user tags: [kMaxTag, 2 kMaxTag) ready messages, [2^30, 2^31) data.
int readySlot(int tag) { return PointToPoint::kMaxTag | tag; }
int dataSlot(int64_t n) { return (1 << 30) | static_cast<int>(n % (1 << 30)); }

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
      if (auto other = std::static_pointer_cast<Completion>(w.lock())) carry(other);  // or once armed
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
                           std::chrono::milliseconds timeout, std::shared_ptr<MatchTable> table,
                           std::function<std::string(int)> liveness)
    : gloo_(std::move(gloo)), rank_(rank), timeout_(timeout), matching_(std::make_shared<Matching>(size)),
      table_(std::move(table)), order_(std::make_shared<PostingOrder>()), liveness_(std::move(liveness)) {}

WorkPtr PointToPoint::send(const at::Tensor& t, int dst, int tag) {
  return table_ ? sendMatched(t, dst, tag) : sendByMessages(t, dst, tag);
}

WorkPtr PointToPoint::recv(const at::Tensor& t, int src, int tag) {
  return table_ ? recvMatched(t, src, tag) : recvByMessages(t, src, tag);
}

WorkPtr PointToPoint::sendByMessages(const at::Tensor& t, int dst, int tag) {
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
  std::string what = sendWhat(rank_, dst, tag);
  std::string missing = sendMissing(dst);
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
  arm(c);
  carry(c);
  return newWork(c, c10d::OpType::SEND, t);
}

WorkPtr PointToPoint::recvByMessages(const at::Tensor& t, int src, int tag) {
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
        return !other || other->claimed();
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
  std::string what = recvWhat(rank_, src, tag);
  std::string missing = recvMissing(src);
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
  arm(c);
  if (src < 0) carry(c);
  return newWork(c, src >= 0 ? c10d::OpType::RECV : c10d::OpType::RECVANYSOURCE, t);
}

void PointToPoint::setTimeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

}  // namespace neuron_sim::distributed
