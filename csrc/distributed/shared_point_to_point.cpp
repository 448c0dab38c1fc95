// Point-to-point between ranks on one machine (point_to_point.h): each
// operation is matched with its peer's in the group's shared-memory match
// table (match_table.h), and each side then posts its one gloo message, the
// data, on the slot the table gave: the sender its bytes (none when the sizes
// differ and the receiver came first), the receiver a receive of the sender's
// size (into its tensor when the sizes match, else into a scratch buffer, so
// gloo neither aborts nor fills part of the tensor). Whichever side posted
// first reads the other's record once its message is through; both then know
// whether the sizes match and raise the same error naming both when they do not.
//
// Everything is posted before isend/irecv returns, so the caller's wait()
// waits on gloo itself and no thread is woken per transfer. A thread carries
// the operation only when its Work is asked without waiting or dropped, or
// when it cannot post yet: a receive from any rank before any send waits for
// it, or a table without room (either waits on the rank's doorbell in the table).
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/point_to_point.h"

#include <ATen/ops/empty.h>

#include <stdexcept>

#include "distributed/collective_staging.h"
#include "distributed/neuron_work.h"
#include "distributed/point_to_point_constants.h"
#include "distributed/point_to_point_work.h"

namespace neuron_sim::distributed {
namespace {

using namespace p2p;

// Data slots of matched transfers, numbered per (sender, receiver) by the
// table: [2^30, 2^31), above the user tags (a group uses this or the
// gloo-message protocol, never both).
int matchedSlot(int64_t n) { return (1 << 30) | static_cast<int>(n % (1 << 30)); }

// Retries `attempt` each time `me`'s doorbell rings until it succeeds. Throws
// "Timeout ..." after `timeout`, or the peer's exit (checked every half second).
template <class F>
void awaitTable(MatchTable& table, int me, int peer, std::chrono::milliseconds timeout,
                const std::function<std::string(int)>& liveness, const std::string& waiting_for, F attempt) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto next_check = start + kLivenessInterval;
  for (;;) {
    uint32_t seen = table.generation(me);  // before the look: a change after it ends the sleep at once
    if (attempt()) return;
    auto now = clock::now();
    if (now - start >= timeout)
      throw std::runtime_error("Timeout waiting for " + waiting_for + " after " + std::to_string(timeout.count()) +
                               " ms");
    if (peer >= 0 && now >= next_check) {
      std::string reason = liveness(peer);
      if (!reason.empty()) throw std::runtime_error(reason);
      next_check = now + kLivenessInterval;
    }
    table.sleep(me, seen, std::min(start + timeout, next_check) - now);
  }
}

// A matched operation's place: what the table said, and the data message posted on that.
struct Matched {
  MatchTable::Posted at;
  std::vector<at::Tensor> buffer;
  c10::intrusive_ptr<c10d::Work> data;
};

// The peer's record: known at posting for the side that came second, read
// from the table (which frees the entry) by the one that came first.
at::Tensor peerRecord(MatchTable& table, MatchTable::Side side, int me, int peer, MatchTable::Posted& at) {
  if (at.matched) return recordFrom(at.other);
  int64_t other[kRecordSlots];
  bool matched = table.settle(side, me, peer, at.entry, other);
  at.entry = -1;
  if (!matched) throw std::runtime_error("the message went through but the match table has no answer for it");
  return recordFrom(other);
}

// After a failure: an entry nobody matched is withdrawn, so no later operation matches it.
void withdraw(MatchTable& table, MatchTable::Side side, int me, int peer, Matched& m) {
  if (m.at.entry < 0 || m.at.matched) return;
  int64_t ignored[kRecordSlots];
  table.settle(side, me, peer, m.at.entry, ignored);
  m.at.entry = -1;
}

}  // namespace

namespace p2p {

int64_t PostingOrder::ticket(Line line) {
  std::lock_guard<std::mutex> g(mu_);
  return lines_[line].issued++;
}

bool PostingOrder::inTurn(Line line, int64_t ticket, const std::function<bool()>& post,
                          const std::function<void()>& next_turn) {
  std::lock_guard<std::mutex> g(mu_);
  Turns& t = lines_[line];
  if (t.next != ticket || !post()) return false;
  advance(t, next_turn);
  return true;
}

void PostingOrder::drop(Line line, int64_t ticket, const std::function<void()>& next_turn) {
  std::lock_guard<std::mutex> g(mu_);
  Turns& t = lines_[line];
  if (t.next == ticket)
    advance(t, next_turn);
  else
    t.dropped.insert(ticket);
}

void PostingOrder::advance(Turns& t, const std::function<void()>& next_turn) {
  ++t.next;
  while (t.dropped.erase(t.next)) ++t.next;
  if (t.next < t.issued) next_turn();  // the next one waits on the doorbell: ring it
}

}  // namespace p2p

c10::intrusive_ptr<c10d::Work> PointToPoint::sendMatched(const at::Tensor& t, int dst, int tag) {
  Staging s;
  at::Tensor data = asBytes(readable(t, s));
  at::Tensor mine = record(t, 0, kHeader);
  auto table = table_;
  auto gloo = gloo_;
  int me = rank_;
  auto order = order_;
  const PostingOrder::Line line{MatchTable::kSend, dst};
  const int64_t turn = order->ticket(line);
  auto start = [=](Matched& m) {  // false: no room in the table yet, or an earlier send waits for it
    return order->inTurn(line, turn, [&] {
      m.at = table->post(MatchTable::kSend, me, dst, tag, mine.data_ptr<int64_t>());
      if (m.at.full) return false;
      // Sizes differ: an empty message completes the receive, which leaves its tensor untouched.
      bool fits = !m.at.matched || m.at.other[kBytes] == data.numel();
      m.buffer = {fits ? data : at::empty({0}, at::kByte)};
      m.data = gloo->send(m.buffer, dst, matchedSlot(m.at.slot));
      return true;
    }, [&] { table->ring(me); });
  };
  Matched posted;
  const bool now = start(posted);
  auto c = newCompletion(t);
  std::string what = sendWhat(rank_, dst, tag);
  std::string missing = sendMissing(dst);
  std::chrono::milliseconds timeout = timeout_.load();
  auto liveness = liveness_;
  c->body = [=, self = c, m = std::move(posted), keep = std::move(s.keep)]() mutable {
    std::exception_ptr err;
    const char* engine = "shared memory";
    try {
      if (!now) awaitTable(*table, me, dst, timeout, liveness, "room in the match table", [&] { return start(m); });
      engine = "gloo";
      m.data->wait(timeout);
      engine = "shared memory";
      at::Tensor theirs = peerRecord(*table, MatchTable::kSend, me, dst, m.at);
      if (field(theirs, kBytes) != data.numel()) err = sizesDiffer(what, me, mine, dst, theirs);
    } catch (...) {
      err = explain(what, missing, messageOf(std::current_exception()), timeout, engine);
      withdraw(*table, MatchTable::kSend, me, dst, m);
      if (m.data)
        abandon({m.data}, {data, m.buffer[0]});
      else
        order->drop(line, turn, [&] { table->ring(me); });
    }
    keep.clear();  // staging buffers leave HBM accounting as the send completes
    return err;
  };
  arm(c);
  if (!now) carry(c);
  return newWork(c, c10d::OpType::SEND, t);
}

c10::intrusive_ptr<c10d::Work> PointToPoint::recvMatched(const at::Tensor& t, int src, int tag) {
  Staging s;
  at::Tensor target = asBytes(writable(t, s, /*copy_in=*/false));
  at::Tensor mine = record(t, 0, kReady);
  auto table = table_;
  auto gloo = gloo_;
  int me = rank_;
  auto order = order_;
  const PostingOrder::Line line{MatchTable::kRecv, src};
  const int64_t turn = order->ticket(line);
  // false: no send to take yet (from any rank), no room in the table, or an earlier receive waits
  auto start = [=](Matched& m) {
    return order->inTurn(line, turn, [&] {
      m.at = src >= 0 ? table->post(MatchTable::kRecv, me, src, tag, mine.data_ptr<int64_t>())
                      : table->takeAnySend(me, tag, mine.data_ptr<int64_t>());
      if (m.at.full || !(m.at.matched || m.at.entry >= 0)) return false;
      bool fits = !m.at.matched || m.at.other[kBytes] == target.numel();
      m.buffer = {fits ? target : at::empty({m.at.other[kBytes]}, at::kByte)};
      m.data = gloo->recv(m.buffer, m.at.source, matchedSlot(m.at.slot));
      return true;
    }, [&] { table->ring(me); });
  };
  Matched posted;
  const bool now = start(posted);
  auto c = newCompletion(t);
  if (now) c->source = posted.at.source;
  std::string what = recvWhat(rank_, src, tag);
  std::string missing = recvMissing(src);
  std::chrono::milliseconds timeout = timeout_.load();
  auto liveness = liveness_;
  c->body = [=, self = c, m = std::move(posted), keep = std::move(s.keep), steps = std::move(s.steps)]() mutable {
    std::exception_ptr err;
    const char* engine = "shared memory";
    try {
      if (!now) {
        awaitTable(*table, me, src, timeout, liveness, src >= 0 ? "room in the match table" : "a send on the tag",
                   [&] { return start(m); });
        std::lock_guard<std::mutex> g(c->mu);
        c->source = m.at.source;
      }
      engine = "gloo";
      m.data->wait(timeout);
      engine = "shared memory";
      at::Tensor theirs = peerRecord(*table, MatchTable::kRecv, me, m.at.source, m.at);
      if (field(theirs, kBytes) == target.numel()) {
        for (const auto& step : steps) step();
      } else {
        err = sizesDiffer(what, m.at.source, theirs, me, mine);
      }
    } catch (...) {
      err = explain(what, missing, messageOf(std::current_exception()), timeout, engine);
      withdraw(*table, MatchTable::kRecv, me, m.at.source, m);
      if (m.data)
        abandon({m.data}, {target, m.buffer[0]});
      else
        order->drop(line, turn, [&] { table->ring(me); });
    }
    keep.clear();
    steps.clear();
    return err;
  };
  arm(c);
  if (!now) carry(c);
  return newWork(c, src >= 0 ? c10d::OpType::RECV : c10d::OpType::RECVANYSOURCE, t);
}

}  // namespace neuron_sim::distributed
