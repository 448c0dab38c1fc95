// What both ways of matching point-to-point operations (point_to_point.h)
// share: the record describing a tensor (sent in a header or ready message,
// or written into the match table), the errors the user reads, and an
// operation's completion with the Work the caller holds.
#pragma once
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "distributed/point_to_point_constants.h"

namespace neuron_sim::distributed::p2p {

using distributed::kRecordSlots;  // a record's words (point_to_point_constants.h)
// kIndex: in a header, the send's index among the sends to that peer on that
// tag; in a ready message, the number of the slot the data receive waits on.
enum Field : int { kIndex = 0, kKind, kBytes, kDtype, kNdim, kFirstDim };
enum Kind : int64_t { kHeader = 1, kReady = 2 };
static_assert(kFirstDim < kRecordSlots, "a record's fields leave room for the tensor's dims");

at::Tensor record(const at::Tensor& t, int64_t index, int64_t kind);
at::Tensor recordFrom(const int64_t* words);  // a copy of kRecordSlots words
int64_t field(const at::Tensor& rec, Field f);
// "float32[4, 3] (48 bytes)", from a record.
std::string describe(const at::Tensor& rec);

// A failure as the user reads it: which operation, which peer and tag, and
// why. `engine` says where `message` came from ("gloo", "shared memory").
std::exception_ptr explain(const std::string& what, const std::string& missing, const std::string& message,
                           std::chrono::milliseconds timeout, const char* engine = "gloo");
// How errors name an operation and the peer that never came: the same words
// whichever way the operation travels (shared memory or gloo messages).
std::string sendWhat(int rank, int dst, int tag);
std::string sendMissing(int dst);
std::string recvWhat(int rank, int src, int tag);  // src < 0: from any rank
std::string recvMissing(int src);
std::exception_ptr sizesDiffer(const std::string& what, int sender, const at::Tensor& header, int receiver,
                               const at::Tensor& ready);

// Where an operation is in its life. Each step is taken once, by whichever
// thread gets there first (a compare-exchange):
//   kPosting --arm--> kReady --carry--> kCarried --run--> kRunning --> kDone
//   kPosting --carry--> kWanted --arm--> kCarried    (asked to run before its body was set)
//   kReady --run--> kRunning                          (the caller's wait() came first)
// carry() on a later stage, or run on any other, does nothing.
enum class Stage : uint8_t { kPosting, kWanted, kReady, kCarried, kRunning, kDone };

// One operation's completion, shared by its Work and the thread carrying it.
struct Completion {
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<Stage> stage{Stage::kPosting};  // kDone is set under mu (waiters read it there)
  std::exception_ptr error;
  int source = -1;
  c10::intrusive_ptr<c10::ivalue::Future> future;
  // The operation's waits, returning its error: run once, by whichever thread
  // claims it first - the caller's wait() or the thread carrying it.
  std::function<std::exception_ptr()> body;
  std::vector<at::Tensor> value;

  void runUnlessClaimed();
  bool claimed() const { return stage.load() >= Stage::kRunning; }
  bool done() const { return stage.load() == Stage::kDone; }
};

std::shared_ptr<Completion> newCompletion(const at::Tensor& t);
// `c`'s body is set: the operation may run from now on (at once on a carrier
// thread if something asked for it already).
void arm(const std::shared_ptr<Completion>& c);

// Hands `c` to a carrier thread, which runs it unless a wait() claimed it
// first: at once for an operation with a message still to post on the way;
// one with everything posted only when its Work is asked without a wait() or dropped.
// Before arm(), only marks it wanted; once handed or claimed, does nothing.
void carry(const std::shared_ptr<Completion>& c);

// Operations of one side towards one peer (a rank's sends to rank 2, its
// receives from any rank, ...) enter the match table in the order they were
// posted, as matching per tag is first come, first matched: one that found no
// room waits, and those posted after it wait behind it (shared_point_to_point.cpp).
struct PostingOrder {
  using Line = std::pair<int, int>;  // (side, peer; -1: any rank)
  // This operation's turn on its line.
  int64_t ticket(Line line);
  // Runs `post` if it is `ticket`'s turn; its success ends the turn (true).
  // `next_turn` is called when operations wait behind the one that posted.
  bool inTurn(Line line, int64_t ticket, const std::function<bool()>& post, const std::function<void()>& next_turn);
  // An operation that failed before it posted gives up its turn.
  void drop(Line line, int64_t ticket, const std::function<void()>& next_turn);

 private:
  struct Turns {
    int64_t issued = 0, next = 0;
    std::set<int64_t> dropped;
  };
  void advance(Turns& t, const std::function<void()>& next_turn);
  std::mutex mu_;
  std::map<Line, Turns> lines_;
};

// Messages still posted in gloo when their operation failed: gloo keeps a raw
// pointer to their memory, which must outlive them (only a failed operation
// leaves any), so it stays for the rest of the process.
void abandon(std::vector<c10::intrusive_ptr<c10d::Work>> works, std::vector<at::Tensor> memory);

c10::intrusive_ptr<c10d::Work> newWork(std::shared_ptr<Completion> c, c10d::OpType type, const at::Tensor& t);

}  // namespace neuron_sim::distributed::p2p
