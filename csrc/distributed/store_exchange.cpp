#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/store_exchange.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <cstring>

namespace neuron_sim::distributed {
namespace {

// The least a group's setup waits for its peers to reach the group's creation.
constexpr std::chrono::seconds kSetupTimeout{120};

// First word of the record the watcher puts for a peer that has exited.
constexpr int64_t kGoneMarker = -1;

std::string recordKey(int64_t seq, int rank) {
  return "neuron_agree/" + std::to_string(seq) + "/" + std::to_string(rank);
}

std::vector<uint8_t> toBytes(const std::vector<int64_t>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(int64_t));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace

std::unique_ptr<StoreExchange> StoreExchange::create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                     int size, std::chrono::milliseconds timeout) {
  if (!store) return nullptr;
  // Only a TCPStore answers a wait as soon as a key is set (FileStore polls its file).
  c10::intrusive_ptr<c10d::Store> base = store;
  while (auto* prefix = dynamic_cast<c10d::PrefixStore*>(base.get())) base = prefix->getUnderlyingStore();
  if (!dynamic_cast<c10d::TCPStore*>(base.get())) return nullptr;
  c10::intrusive_ptr<c10d::Store> own;
  try {
    own = store->clone();
  } catch (...) {
    return nullptr;
  }
  return std::unique_ptr<StoreExchange>(new StoreExchange(std::move(own), rank, size, timeout));
}

StoreExchange::StoreExchange(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                             std::chrono::milliseconds timeout)
    : store_(std::move(store)), rank_(rank), size_(size), timeout_(timeout), peers_(store_, rank, size) {
  // Setting up waits for every peer to reach the group's creation, which a
  // loaded machine can delay by seconds: the group's timeout (2 s in a test of
  // timeouts) is for collectives, so setup waits at least kSetupTimeout.
  store_->setTimeout(std::max<std::chrono::milliseconds>(timeout, kSetupTimeout));
  peers_.publish();
  if (size_ >= 2) shared_ = setUpSharedMemory(*store_, rank_, size_, peers_.readAll());
  store_->setTimeout(timeout);
  // Shared-memory waits check their peer's liveness themselves.
  if (!shared_.exchange)
    peers_.start([](c10d::Store& probe, int peer, int64_t seq, const std::string& reason) {
      std::vector<uint8_t> marker(sizeof(int64_t) + reason.size());
      std::memcpy(marker.data(), &kGoneMarker, sizeof(int64_t));
      std::memcpy(marker.data() + sizeof(int64_t), reason.data(), reason.size());
      probe.set(recordKey(seq, peer), marker);
    });
}

void StoreExchange::setTimeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  store_->setTimeout(timeout);
  timeout_ = timeout;
}

std::vector<uint8_t> StoreExchange::read(int peer, int64_t seq) {
  peers_.waitingOn(peer, seq);
  std::vector<uint8_t> got;
  try {
    got = store_->get(recordKey(seq, peer));
  } catch (const c10::DistStoreError& e) {
    peers_.waitOver();
    if (std::string(e.what()).find("imeout") == std::string::npos) throw;
    C10_THROW_ERROR(DistStoreError, "Socket Timeout waiting for rank " + std::to_string(peer) + "'s record");
  } catch (...) {
    peers_.waitOver();
    throw;
  }
  peers_.waitOver();
  int64_t first = 0;
  if (got.size() >= sizeof(int64_t)) std::memcpy(&first, got.data(), sizeof(int64_t));
  if (first == kGoneMarker)
    C10_THROW_ERROR(DistNetworkError, std::string(got.begin() + sizeof(int64_t), got.end()));
  return got;
}

int64_t StoreExchange::next() {
  std::lock_guard<std::mutex> lock(mutex_);
  return seq_++;  // counted even when this one fails: a later record then shows the ranks out of step
}

bool StoreExchange::tryExchange(int64_t seq, const std::vector<int64_t>& mine, std::vector<int64_t>* all) {
  std::lock_guard<std::mutex> lock(mutex_);
  return shared_.exchange && shared_.exchange->tryExchange(rank_, seq, mine, all);
}

std::vector<int64_t> StoreExchange::exchange(int64_t seq, const std::vector<int64_t>& mine) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shared_.exchange)
    return shared_.exchange->exchange(rank_, seq, mine, timeout_, [this](int peer) { return peers_.gone(peer); });
  std::vector<int64_t> msg{seq};
  msg.insert(msg.end(), mine.begin(), mine.end());
  auto bytes = toBytes(msg);
  store_->set(recordKey(seq, rank_), bytes);
  const size_t n = mine.size();
  std::vector<int64_t> all(n * size_);
  std::copy(mine.begin(), mine.end(), all.begin() + n * rank_);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    auto got = read(p, seq);
    TORCH_CHECK(got.size() == bytes.size(), "agreement record of unexpected size from rank ", p);
    int64_t their_seq;
    std::memcpy(&their_seq, got.data(), sizeof(int64_t));
    if (their_seq != seq)
      C10_THROW_ERROR(DistBackendError,
                      "the ranks are out of step: rank " + std::to_string(p) + " is at its collective #" +
                          std::to_string(their_seq) + ", this rank at #" + std::to_string(seq) +
                          " (an earlier collective failed on some ranks only; the group cannot be used after that)");
    std::memcpy(all.data() + n * p, got.data() + sizeof(int64_t), n * sizeof(int64_t));
  }
  // Every peer has read this rank's previous record: each read it before
  // writing the record just read from it.
  if (seq > 0) store_->deleteKey(recordKey(seq - 1, rank_));
  return all;
}

}  // namespace neuron_sim::distributed
