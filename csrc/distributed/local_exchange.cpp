#include "distributed/local_exchange.h"
#include "distributed/point_to_point_constants.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <random>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace neuron_sim::distributed {

// A rank's slot. `published` is the last collective whose record the rank
// has written; `generation` changes with every write and is the futex word
// waiters sleep on. Two record buffers, by the collective's parity: a rank
// can write its record for collective n+1 while a slower peer still reads
// the one for n, but it cannot reach n+2 before that peer has written n+1,
// which the peer does only after it has read n.
struct LocalExchange::Slot {
  std::atomic<int64_t> published;
  std::atomic<uint32_t> generation;
  std::atomic<uint32_t> waiters;  // peers asleep (or about to sleep) on `generation`: a write wakes them
};

namespace {

// Across processes these atomics must be plain memory words.
static_assert(std::atomic<int64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

constexpr uint64_t kMagic = 0x6e6575726f6e4147ull;  // "neuronAG"
constexpr size_t kLine = 64;
// Long enough to catch a peer that is a few microseconds behind without a
// system call; short enough not to hold a core long.
constexpr std::chrono::microseconds kSpin{30};

// Spinning pays only where the awaited peer has a core of its own: around a
// collective each rank keeps two threads busy (the caller and gloo's), so
// with fewer than two cores per rank a spinning waiter takes the core the
// peer needs to arrive. Measured on 2 cores and 2 ranks under load: 30 us of
// CPU per collective spent spinning, the waits longer, not shorter.
std::chrono::microseconds spinFor(int ranks) {
  return std::thread::hardware_concurrency() >= 2u * static_cast<unsigned>(ranks) ? kSpin
                                                                                  : std::chrono::microseconds{0};
}

struct Header {
  uint64_t magic;
  int64_t size;
  int64_t record_slots;
};

size_t roundUp(size_t n) { return (n + kLine - 1) / kLine * kLine; }
size_t slotBytes(size_t record_slots) { return roundUp(kLine + 2 * (1 + record_slots) * sizeof(int64_t)); }
size_t segmentBytes(int size, size_t record_slots) { return kLine + size * slotBytes(record_slots); }

uint32_t* futexWord(std::atomic<uint32_t>* a) { return reinterpret_cast<uint32_t*>(a); }

void futexWait(std::atomic<uint32_t>* word, uint32_t seen, std::chrono::nanoseconds at_most) {
  timespec ts{static_cast<time_t>(at_most.count() / 1000000000), static_cast<long>(at_most.count() % 1000000000)};
  // Not FUTEX_PRIVATE: the word is shared with other processes.
  syscall(SYS_futex, futexWord(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void futexWakeAll(std::atomic<uint32_t>* word) { syscall(SYS_futex, futexWord(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0); }

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

void* mapShared(int fd, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

LocalExchange::LocalExchange(void* base, size_t bytes, std::string name, int size, size_t record_slots)
    : base_(base), bytes_(bytes), name_(std::move(name)), size_(size), record_slots_(record_slots),
      slot_bytes_(slotBytes(record_slots)), spin_(spinFor(size)) {}

LocalExchange::~LocalExchange() { munmap(base_, bytes_); }

std::unique_ptr<LocalExchange> LocalExchange::create(int size, size_t record_slots, std::string* name) {
  std::random_device rd;
  *name = "/neuron_sim_agree_" + std::to_string(getpid()) + "_" + std::to_string(rd());
  int fd = shm_open(name->c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return nullptr;
  const size_t bytes = segmentBytes(size, record_slots);
  void* base = ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? mapShared(fd, bytes) : nullptr;
  close(fd);
  if (!base) {
    shm_unlink(name->c_str());
    return nullptr;
  }
  // ftruncate zero-fills; only the starting state needs writing.
  auto ex = std::unique_ptr<LocalExchange>(new LocalExchange(base, bytes, *name, size, record_slots));
  for (int r = 0; r < size; ++r) {
    new (ex->slot(r)) Slot();
    ex->slot(r)->published.store(-1);
    ex->slot(r)->generation.store(0);
    ex->slot(r)->waiters.store(0);
  }
  auto* h = static_cast<Header*>(base);
  h->size = size;
  h->record_slots = static_cast<int64_t>(record_slots);
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kMagic;
  return ex;
}

std::unique_ptr<LocalExchange> LocalExchange::open(const std::string& name, int size, size_t record_slots) {
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return nullptr;
  struct stat st{};
  const size_t bytes = segmentBytes(size, record_slots);
  void* base = fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == bytes ? mapShared(fd, bytes) : nullptr;
  close(fd);
  if (!base) return nullptr;
  const auto* h = static_cast<const Header*>(base);
  if (h->magic != kMagic || h->size != size || h->record_slots != static_cast<int64_t>(record_slots)) {
    munmap(base, bytes);
    return nullptr;
  }
  return std::unique_ptr<LocalExchange>(new LocalExchange(base, bytes, name, size, record_slots));
}

void LocalExchange::unlink() { shm_unlink(name_.c_str()); }

LocalExchange::Slot* LocalExchange::slot(int rank) const {
  return reinterpret_cast<Slot*>(static_cast<char*>(base_) + kLine + rank * slot_bytes_);
}

int64_t* LocalExchange::record(int rank, int64_t seq) const {
  return reinterpret_cast<int64_t*>(reinterpret_cast<char*>(slot(rank)) + kLine) + (seq & 1) * (1 + record_slots_);
}

void LocalExchange::await(int peer, int64_t seq, std::chrono::milliseconds timeout,
                          const std::function<std::string(int)>& gone) {
  Slot* s = slot(peer);
  auto arrived = [&] { return s->published.load(std::memory_order_acquire) >= seq; };
  if (arrived()) return;
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  while (clock::now() - start < spin_)
    for (int i = 0; i < 64; ++i) {
      if (arrived()) return;
      cpuRelax();
    }
  auto next_check = start + kLivenessInterval;
  // Counted as a waiter before the word is read (both sequentially
  // consistent, as the writer's increment and its look at `waiters`): either
  // the writer sees this waiter and wakes it, or this read sees the write.
  struct Waiting {
    std::atomic<uint32_t>& n;
    explicit Waiting(std::atomic<uint32_t>& w) : n(w) { n.fetch_add(1); }
    ~Waiting() { n.fetch_sub(1); }
  } waiting(s->waiters);
  for (;;) {
    // Read the word before the last look: a write after that look changes
    // it, and the futex then returns at once instead of sleeping.
    uint32_t seen = s->generation.load();
    if (arrived()) return;
    auto now = clock::now();
    if (now - start >= timeout)
      throw std::runtime_error("Timeout waiting for rank " + std::to_string(peer) + "'s record after " +
                               std::to_string(timeout.count()) + " ms");
    if (now >= next_check) {
      std::string reason = gone(peer);
      if (!reason.empty()) throw std::runtime_error(reason);
      next_check = now + kLivenessInterval;
    }
    auto until = std::min(start + timeout, next_check);
    futexWait(&s->generation, seen, std::chrono::duration_cast<std::chrono::nanoseconds>(until - now));
  }
}

void LocalExchange::publish(int rank, int64_t seq, const std::vector<int64_t>& mine) {
  if (mine.size() != record_slots_) throw std::invalid_argument("agreement record of unexpected size");
  Slot* own = slot(rank);
  int64_t* out = record(rank, seq);
  out[0] = seq;
  std::memcpy(out + 1, mine.data(), record_slots_ * sizeof(int64_t));
  own->published.store(seq, std::memory_order_release);
  own->generation.fetch_add(1);
  if (own->waiters.load() > 0) futexWakeAll(&own->generation);  // no system call when no peer sleeps
}

void LocalExchange::copyIn(int peer, int64_t seq, std::vector<int64_t>& all) const {
  const int64_t* in = record(peer, seq);
  if (in[0] != seq)
    throw std::runtime_error("the ranks are out of step: rank " + std::to_string(peer) + " is at its collective #" +
                             std::to_string(in[0]) + ", this rank at #" + std::to_string(seq) +
                             " (an earlier collective failed on some ranks only; the group cannot be used after that)");
  std::memcpy(all.data() + record_slots_ * peer, in + 1, record_slots_ * sizeof(int64_t));
}

bool LocalExchange::tryExchange(int rank, int64_t seq, const std::vector<int64_t>& mine, std::vector<int64_t>* all) {
  publish(rank, seq, mine);
  for (int p = 0; p < size_; ++p)
    if (p != rank && slot(p)->published.load(std::memory_order_acquire) < seq) return false;
  all->assign(record_slots_ * size_, 0);
  std::memcpy(all->data() + record_slots_ * rank, mine.data(), record_slots_ * sizeof(int64_t));
  for (int p = 0; p < size_; ++p)
    if (p != rank) copyIn(p, seq, *all);
  return true;
}

std::vector<int64_t> LocalExchange::exchange(int rank, int64_t seq, const std::vector<int64_t>& mine,
                                             std::chrono::milliseconds timeout,
                                             const std::function<std::string(int)>& gone) {
  if (slot(rank)->published.load(std::memory_order_relaxed) < seq) publish(rank, seq, mine);
  std::vector<int64_t> all(record_slots_ * size_);
  std::memcpy(all.data() + record_slots_ * rank, mine.data(), record_slots_ * sizeof(int64_t));
  for (int p = 0; p < size_; ++p) {
    if (p == rank) continue;
    await(p, seq, timeout, gone);
    copyIn(p, seq, all);
  }
  return all;
}

}  // namespace neuron_sim::distributed
