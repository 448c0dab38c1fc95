// Point-to-point (send, recv, recv from any source) on gloo's own send/recv.
//
// gloo given a message larger than the receive buffer aborts the process from
// its own thread, and a smaller one silently fills part of the buffer. So a
// send travels as three gloo messages, each on a slot of its own:
//   header  sender -> receiver, on the user's tag: the tensor's dtype, shape,
//           bytes, and the sender's sequence number towards this peer;
//   data    sender -> receiver, on a slot named by that sequence number;
//   answer  receiver -> sender, on a slot named by that sequence number: the
//           receiver's tensor, and whether the sizes match.
// The receiver posts its data receive only once the header has said how many
// bytes come: into the caller's tensor when the sizes match, into a scratch
// buffer that is discarded otherwise (the message is consumed, so the tag
// stays usable), and both ranks raise an error naming both tensors. Headers
// of one (peer, tag) are matched in the order they were posted, as gloo
// matches them; data and answers need no ordering, their slots are unique.
//
// gloo's send and receive complete only when both sides have posted, and
// its p2p Work has no future: each operation is carried by a thread of its
// own, which waits on gloo (at most the group's timeout per message), posts
// the next message and completes the Work. isend/irecv in any order across
// ranks (batch_isend_irecv, pipeline schedules) thus never wait on each other.
#pragma once
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <vector>

namespace neuron_sim::distributed {

class PointToPoint {
 public:
  PointToPoint(c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size, std::chrono::milliseconds timeout);

  // `t` is a neuron tensor (checked by the caller). `src` -1: from any rank.
  c10::intrusive_ptr<c10d::Work> send(const at::Tensor& t, int dst, int tag);
  c10::intrusive_ptr<c10d::Work> recv(const at::Tensor& t, int src, int tag);
  // Bounds the wait for each message (the group's timeout).
  void setTimeout(std::chrono::milliseconds timeout);

  // User tags go up to this (exclusive); the slots above carry data and answers.
  static constexpr int kMaxTag = 1 << 29;

 private:
  c10::intrusive_ptr<c10d::Backend> gloo_;
  int rank_;
  int size_;
  std::atomic<std::chrono::milliseconds> timeout_;
  std::mutex mutex_;
  std::vector<int64_t> next_seq_;  // per destination rank
};

}  // namespace neuron_sim::distributed
