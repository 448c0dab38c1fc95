#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/peer_watcher.h"

#include "distributed/point_to_point_constants.h"

#include <fstream>
#include <sstream>
#include <unistd.h>

namespace neuron_sim::distributed {
namespace {

int64_t steadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
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

// "boot-id pid-namespace": the machine and container an identity names.
std::string machineOf(const std::string& identity) {
  std::istringstream is(identity);
  std::string boot, ns;
  is >> boot >> ns;
  return boot + " " + ns;
}

// "" while the process `identity[peer]` names may still come, else that it has exited.
std::string exitedPeer(const std::vector<std::string>& identity, int peer) {
  std::istringstream theirs(identity[peer]);
  std::string boot, ns, start;
  long pid = 0;
  theirs >> boot >> ns >> pid >> start;
  // Another machine or container: only the timeout tells.
  if (boot + " " + ns != machineOf(selfIdentity()) || pid <= 0) return "";
  auto [state, now_start] = procState(pid);
  if (state == '\0' || state == 'Z' || state == 'X' || now_start != start)
    return "rank " + std::to_string(peer) + " (pid " + std::to_string(pid) + ") has exited";
  return "";
}

}  // namespace

PeerWatcher::PeerWatcher(c10::intrusive_ptr<c10d::Store> store, int rank, int size)
    : store_(std::move(store)), rank_(rank), identity_(size) {}

PeerWatcher::~PeerWatcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PeerWatcher::publish() { store_->set(identityKey(rank_), selfIdentity()); }

bool PeerWatcher::readAll() {
  const std::string here = machineOf(selfIdentity());
  bool local = true;
  for (size_t p = 0; p < identity_.size(); ++p) {
    auto v = store_->get(identityKey(static_cast<int>(p)));
    identity_[p].assign(v.begin(), v.end());
    local = local && machineOf(identity_[p]) == here;
  }
  return local;
}

void PeerWatcher::start(EndWait end_wait) {
  end_wait_ = std::move(end_wait);
  thread_ = std::thread([this] { watch(); });
}

void PeerWatcher::waitingOn(int peer, int64_t seq) {
  waiting_seq_.store(seq);
  waiting_since_ns_.store(steadyNowNs());
  waiting_on_.store(peer);
}

void PeerWatcher::waitOver() { waiting_on_.store(-1); }

std::string PeerWatcher::gone(int peer) {
  if (cancelling_.load()) {
    std::lock_guard<std::mutex> g(mutex_);
    return cancelled_;
  }
  return exited(peer);
}

void PeerWatcher::cancel(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelled_ = reason;
  }
  cancelling_.store(true);
  cv_.notify_all();
}

std::function<std::string(int)> PeerWatcher::liveness() const {
  return [identity = identity_](int peer) { return exitedPeer(identity, peer); };
}

void PeerWatcher::watch() {
  // Checked every kLivenessInterval: a crashed rank fails the others within
  // about two of these rather than after the group's timeout.
  const int64_t interval_ns = std::chrono::nanoseconds(kLivenessInterval).count();
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    cv_.wait_for(lock, kLivenessInterval);
    int peer = waiting_on_.load();
    int64_t seq = waiting_seq_.load();
    if (stop_ || peer < 0 || seq == reported_seq_ ||
        (cancelled_.empty() && steadyNowNs() - waiting_since_ns_.load() < interval_ns))
      continue;
    try {
      if (!probe_) probe_ = store_->clone();
      std::string reason = cancelled_.empty() ? exited(peer) : cancelled_;
      if (reason.empty()) continue;
      end_wait_(*probe_, peer, seq, reason);
      reported_seq_ = seq;
    } catch (...) {
      // The store itself is unreachable: the wait fails on its own.
    }
  }
}

std::string PeerWatcher::exited(int peer) {
  if (identity_[peer].empty()) {
    if (!probe_->check({identityKey(peer)})) return "";
    auto v = probe_->get(identityKey(peer));
    identity_[peer].assign(v.begin(), v.end());
  }
  return exitedPeer(identity_, peer);
}

}  // namespace neuron_sim::distributed
