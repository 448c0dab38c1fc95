#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/store_exchange.h"

#include "distributed/collective_check.h"
#include "runtime/environment.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace neuron_sim::distributed {
namespace {

// How often the watcher looks at the wait in progress: a crashed rank fails
// the others within about two of these rather than after the group's timeout.
constexpr std::chrono::milliseconds kProbeInterval{500};
// The least a group's setup waits for its peers to reach the group's creation.
constexpr std::chrono::seconds kSetupTimeout{120};

// First word of the record the watcher pushes for a peer that has exited.
constexpr int64_t kGoneMarker = -1;

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string recordKey(int64_t seq, int rank) {
  return "neuron_agree/" + std::to_string(seq) + "/" + std::to_string(rank);
}

std::string identityKey(int rank) { return "neuron_agree/process/" + std::to_string(rank); }

std::string firstLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

std::string pidNamespace() {
  char buf[128] = {0};
  ssize_t n = readlink("/proc/self/ns/pid", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : std::string();
}

// The state letter and start time (fields 3 and 22 of /proc/PID/stat), or
// {'\0', ""} when the process does not exist. The name field may hold
// spaces: fields are counted after its closing parenthesis.
std::pair<char, std::string> procState(long pid) {
  std::string stat = firstLine("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  if (close == std::string::npos) return {'\0', ""};
  std::istringstream is(stat.substr(close + 1));
  std::string field, start;
  char state = '\0';
  for (int i = 3; i <= 22 && (is >> field); ++i) {
    if (i == 3) state = field.empty() ? '\0' : field[0];
    if (i == 22) start = field;
  }
  return {state, start};
}

// Which process this is, in terms a peer on the same machine can check:
// boot id, pid namespace, pid, start time (a reused pid starts later).
std::string selfIdentity() {
  long pid = static_cast<long>(getpid());
  return firstLine("/proc/sys/kernel/random/boot_id") + " " + pidNamespace() + " " + std::to_string(pid) + " " +
         procState(pid).second;
}

std::vector<uint8_t> toBytes(const std::vector<int64_t>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(int64_t));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// "" while the process `identity[peer]` names may still come, else that it has exited.
std::string exitedPeer(const std::vector<std::string>& identity, int peer) {
  std::istringstream theirs(identity[peer]), ours(selfIdentity());
  std::string boot, ns, start, my_boot, my_ns;
  long pid = 0;
  theirs >> boot >> ns >> pid >> start;
  ours >> my_boot >> my_ns;
  if (boot != my_boot || ns != my_ns || pid <= 0) return "";  // another machine or container: only the timeout tells
  auto [state, now_start] = procState(pid);
  if (state == '\0' || state == 'Z' || state == 'X' || now_start != start)
    return "rank " + std::to_string(peer) + " (pid " + std::to_string(pid) + ") has exited";
  return "";
}

// A shared-memory segment every rank of the group maps, or none: rank 0
// creates it and names it under `key` ("" for none: not `local`, or shared
// memory unavailable), each rank says whether it mapped it, and all use it
// only if all did (a container may see another /dev/shm).
template <class Segment>
std::unique_ptr<Segment> shareSegment(c10d::Store& store, int rank, int size, const std::string& key, bool local,
                                      const std::function<std::unique_ptr<Segment>(std::string*)>& create,
                                      const std::function<std::unique_ptr<Segment>(const std::string&)>& open) {
  std::unique_ptr<Segment> seg;
  std::string name;
  if (rank == 0) {
    if (local) seg = create(&name);
    store.set(key + "/name", name);
  } else {
    auto v = store.get(key + "/name");
    name.assign(v.begin(), v.end());
    if (!name.empty()) seg = open(name);
  }
  if (name.empty()) return nullptr;
  auto ok_key = [&](int p) { return key + "/mapped/" + std::to_string(p); };
  store.set(ok_key(rank), std::string(seg ? "1" : "0"));
  bool all = seg != nullptr;
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    auto v = store.get(ok_key(p));
    all = all && v.size() == 1 && v[0] == '1';
  }
  if (rank == 0 && seg) seg->unlink();  // every peer has tried to open it by now
  return all ? std::move(seg) : nullptr;
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
    : store_(std::move(store)), rank_(rank), size_(size), timeout_(timeout), identity_(size) {
  // Setting up waits for every peer to reach the group's creation, which a
  // loaded machine can delay by seconds: the group's timeout (2 s in a test of
  // timeouts) is for collectives, so setup waits at least kSetupTimeout.
  store_->setTimeout(std::max<std::chrono::milliseconds>(timeout, kSetupTimeout));
  store_->set(identityKey(rank_), selfIdentity());
  local_ = connectLocal();
  store_->setTimeout(timeout);
  // Shared-memory waits check their peer's liveness themselves.
  if (!local_) watcher_ = std::thread([this] { watch(); });
}

StoreExchange::~StoreExchange() {
  {
    std::lock_guard<std::mutex> lock(watch_mutex_);
    stop_ = true;
  }
  watch_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

void StoreExchange::setTimeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  store_->setTimeout(timeout);
  timeout_ = timeout;
}

std::unique_ptr<LocalExchange> StoreExchange::connectLocal() {
  if (size_ < 2) return nullptr;
  // On one machine: every rank has this boot id and pid namespace.
  std::istringstream ours(selfIdentity());
  std::string my_boot, my_ns;
  ours >> my_boot >> my_ns;
  bool local = true;
  for (int p = 0; p < size_; ++p) {
    auto v = store_->get(identityKey(p));
    identity_[p].assign(v.begin(), v.end());
    std::istringstream theirs(identity_[p]);
    std::string boot, ns;
    theirs >> boot >> ns;
    local = local && boot == my_boot && ns == my_ns;
  }
  // NEURON_SIM_AGREEMENT=store (read on rank 0, which decides for all):
  // what ranks on several machines do, on one (tests cover that path so).
  if (rank_ == 0 && runtime::envValue("NEURON_SIM_AGREEMENT") == "store") local = false;
  match_ = shareSegment<MatchTable>(
      *store_, rank_, size_, "neuron_agree/match", local, [&](std::string* name) { return MatchTable::create(size_, name); },
      [&](const std::string& name) { return MatchTable::open(name, size_); });
  return shareSegment<LocalExchange>(
      *store_, rank_, size_, "neuron_agree/local", local,
      [&](std::string* name) { return LocalExchange::create(size_, kSignatureSlots, name); },
      [&](const std::string& name) { return LocalExchange::open(name, size_, kSignatureSlots); });
}

std::function<std::string(int)> StoreExchange::liveness() const {
  return [identity = identity_](int peer) { return exitedPeer(identity, peer); };
}

void StoreExchange::watch() {
  std::unique_lock<std::mutex> lock(watch_mutex_);
  while (!stop_) {
    watch_cv_.wait_for(lock, kProbeInterval);
    int peer = waiting_on_.load();
    int64_t seq = waiting_seq_.load();
    if (stop_ || peer < 0 || seq == reported_seq_ ||
        (cancelled_.empty() && nowNs() - waiting_since_ns_.load() < std::chrono::nanoseconds(kProbeInterval).count()))
      continue;
    try {
      if (!probe_) probe_ = store_->clone();
      std::string reason = cancelled_.empty() ? gone(peer) : cancelled_;
      if (reason.empty()) continue;
      std::vector<uint8_t> marker(sizeof(int64_t) + reason.size());
      std::memcpy(marker.data(), &kGoneMarker, sizeof(int64_t));
      std::memcpy(marker.data() + sizeof(int64_t), reason.data(), reason.size());
      probe_->set(recordKey(seq, peer), marker);
      reported_seq_ = seq;
    } catch (...) {
      // The store itself is unreachable: the wait fails on its own.
    }
  }
}

std::string StoreExchange::gone(int peer) {
  if (identity_[peer].empty()) {
    if (!probe_->check({identityKey(peer)})) return "";
    auto v = probe_->get(identityKey(peer));
    identity_[peer].assign(v.begin(), v.end());
  }
  return exitedPeer(identity_, peer);
}

std::vector<uint8_t> StoreExchange::read(int peer, int64_t seq) {
  waiting_seq_.store(seq);
  waiting_since_ns_.store(nowNs());
  waiting_on_.store(peer);
  std::vector<uint8_t> got;
  try {
    got = store_->get(recordKey(seq, peer));
  } catch (const c10::DistStoreError& e) {
    waiting_on_.store(-1);
    if (std::string(e.what()).find("imeout") == std::string::npos) throw;
    C10_THROW_ERROR(DistStoreError, "Socket Timeout waiting for rank " + std::to_string(peer) + "'s record");
  } catch (...) {
    waiting_on_.store(-1);
    throw;
  }
  waiting_on_.store(-1);
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
  return local_ && local_->tryExchange(rank_, seq, mine, all);
}

void StoreExchange::cancel(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(watch_mutex_);
    cancelled_ = reason;
  }
  cancelling_.store(true);
  watch_cv_.notify_all();
}

std::vector<int64_t> StoreExchange::exchange(int64_t seq, const std::vector<int64_t>& mine) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (local_)
    return local_->exchange(rank_, seq, mine, timeout_, [this](int peer) {
      if (cancelling_.load()) {
        std::lock_guard<std::mutex> g(watch_mutex_);
        return cancelled_;
      }
      return gone(peer);
    });
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
