// Point-to-point (send, recv, recv from any source) on gloo's own send/recv.
//
// Ranks on one machine match each operation with its peer's in shared memory
// (match_table.h, shared_point_to_point.cpp): whichever side posts first
// leaves its tensor's record and a data slot, the other finds them, and both
// post their one gloo message (the data) at once, on the caller's thread; a
// transfer is then one gloo message, as on CPU tensors. Ranks on several
// machines exchange that information as gloo messages, as follows.
//
// gloo given a message larger than the receive buffer aborts the process from
// its own thread, and a smaller one silently fills part of the buffer; and its
// TCP transport holds a message back until the peer has posted its receive.
// So every receive is posted before its message can arrive, and the receiver
// says how much it takes before the data leaves. A send travels as three gloo
// messages:
//   header  sender -> receiver, on the user's tag, posted at isend: the
//           tensor's dtype, shape and bytes, and its index among the sends
//           to that peer on that tag;
//   ready   receiver -> sender, on the tag's ready slot, posted at irecv
//           together with the header and data receives: the receiver's
//           tensor and the slot its data receive waits on;
//   data    sender -> receiver, on that slot, as soon as the ready message is
//           in: the bytes when the sizes match, nothing (0 bytes) otherwise.
// Both sides then know whether the sizes match (the receiver from the header,
// the sender from the ready message); when they differ both raise an error
// naming both tensors, and the tag stays usable. Headers and ready messages of
// one (peer, tag) are matched in the order they were posted, as gloo matches
// them; data slots are unique.
//
// A recv from any rank cannot say "ready" before it knows the sender: it
// waits for a header, then posts its data receive and its ready message. The
// n-th ready message to a peer on a tag brings the data of that peer's n-th
// send on the tag; when a recv from any rank took a header meant, by that
// count, for another receive, the two exchange the headers (`Matching`).
//
// gloo's send and receive complete only when both sides have posted, and
// its p2p Work has no future: an operation with a message to post on the way
// (a send, a recv from any rank) is carried at once by a thread of its own
// (carrier_threads.h), which waits on gloo (at most the group's timeout per
// message), posts that message and completes the Work; isend/irecv in any
// order across ranks (batch_isend_irecv, pipeline schedules) thus never wait
// on each other. A recv from a named rank has posted everything: the caller's
// wait() waits on gloo itself, and a thread takes it only when its Work is
// asked without waiting or dropped.
#pragma once
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "distributed/match_table.h"

namespace neuron_sim::distributed {
namespace p2p {
struct PostingOrder;
}

class PointToPoint {
 public:
  // `table`: the group's match table when every rank is on one host
  // (else nullptr: header and ready messages); `liveness(peer)` is "" while
  // that peer's process may still come, else why it never will.
  PointToPoint(c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size, std::chrono::milliseconds timeout,
               std::shared_ptr<MatchTable> table, std::function<std::string(int)> liveness);

  // `t` is a neuron tensor (checked by the caller). `src` -1: from any rank.
  c10::intrusive_ptr<c10d::Work> send(const at::Tensor& t, int dst, int tag);
  c10::intrusive_ptr<c10d::Work> recv(const at::Tensor& t, int src, int tag);
  // Bounds the wait for each message (the group's timeout).
  void setTimeout(std::chrono::milliseconds timeout);

  // User tags go up to this (exclusive); the slots above carry ready messages and data.
  static constexpr int kMaxTag = 1 << 29;

  struct Matching;  // message counts and headers, shared with the threads carrying the operations

 private:
  c10::intrusive_ptr<c10d::Work> sendByMessages(const at::Tensor& t, int dst, int tag);
  c10::intrusive_ptr<c10d::Work> recvByMessages(const at::Tensor& t, int src, int tag);
  c10::intrusive_ptr<c10d::Work> sendMatched(const at::Tensor& t, int dst, int tag);
  c10::intrusive_ptr<c10d::Work> recvMatched(const at::Tensor& t, int src, int tag);

  c10::intrusive_ptr<c10d::Backend> gloo_;
  int rank_;
  std::atomic<std::chrono::milliseconds> timeout_;
  std::shared_ptr<Matching> matching_;
  std::shared_ptr<MatchTable> table_;
  std::shared_ptr<p2p::PostingOrder> order_;
  std::function<std::string(int)> liveness_;
};

}  // namespace neuron_sim::distributed
