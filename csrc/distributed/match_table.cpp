#include "distributed/match_table.h"

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <random>

#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace neuron_sim::distributed {

// Operations one rank may have posted towards one peer and not yet matched
// (or matched, until the first side has read the answer). A side finding the
// table full waits for room (point_to_point.cpp).
constexpr int kEntries = 32;
enum State : int32_t { kFree = 0, kOpen = 1, kMatched = 2 };

struct Key {
  int32_t state;
  int32_t side;
  int64_t tag;
  int64_t order;  // posting order within the pair: the oldest match first
  int64_t slot;
};

struct MatchTable::Pair {
  pthread_mutex_t mu;  // process-shared and robust: a rank that dies holding it does not block its peer
  int64_t next_order;
  int64_t next_slot;  // data slots of this sender towards this receiver: unique while in flight
  Key keys[kEntries];
  int64_t first[kEntries][kRecordWords];   // the first side's record
  int64_t answer[kEntries][kRecordWords];  // the second side's, once matched
};

// `generation` changes whenever a table this rank waits on changes (a send
// posted towards it, an entry freed); `waiters` counts its threads asleep on it.
struct MatchTable::Doorbell {
  std::atomic<uint32_t> generation;
  std::atomic<uint32_t> waiters;
};

namespace {

static_assert(std::atomic<uint32_t>::is_always_lock_free && sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

constexpr uint64_t kTableMagic = 0x6e6575726f6e4d54ull;  // "neuronMT"
constexpr size_t kCacheLine = 64;

struct TableHeader {
  uint64_t magic;
  int64_t size;
  int64_t entries;
};

size_t doorbellsAt() { return kCacheLine; }
size_t pairsAt(int size) { return doorbellsAt() + static_cast<size_t>(size) * kCacheLine; }
// A pair's table (MatchTable::Pair, private: checked against this in pair()).
constexpr size_t kPairBytes = (sizeof(pthread_mutex_t) + 2 * sizeof(int64_t) +
                               kEntries * (sizeof(Key) + 2 * MatchTable::kRecordWords * sizeof(int64_t)) +
                               kCacheLine - 1) / kCacheLine * kCacheLine;
size_t pairBytes() { return kPairBytes; }
size_t tableBytes(int size) { return pairsAt(size) + static_cast<size_t>(size) * size * pairBytes(); }

void* mapTable(int fd, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

class Locked {
 public:
  explicit Locked(pthread_mutex_t* m) : m_(m) {
    // The previous holder died inside: its peer is gone, so the state matters no more than the lock.
    if (pthread_mutex_lock(m_) == EOWNERDEAD) pthread_mutex_consistent(m_);
  }
  ~Locked() { pthread_mutex_unlock(m_); }

 private:
  pthread_mutex_t* m_;
};

// The oldest open entry of `side` on `tag`, or -1.
int oldest(const Key* keys, int32_t side, int64_t tag) {
  int best = -1;
  for (int i = 0; i < kEntries; ++i)
    if (keys[i].state == kOpen && keys[i].side == side && keys[i].tag == tag &&
        (best < 0 || keys[i].order < keys[best].order))
      best = i;
  return best;
}

uint32_t* word(std::atomic<uint32_t>* a) { return reinterpret_cast<uint32_t*>(a); }

}  // namespace

MatchTable::MatchTable(void* base, size_t bytes, std::string name, int size)
    : base_(base), bytes_(bytes), name_(std::move(name)), size_(size) {}

MatchTable::~MatchTable() { munmap(base_, bytes_); }

std::unique_ptr<MatchTable> MatchTable::create(int size, std::string* name) {
  std::random_device rd;
  *name = "/neuron_sim_match_" + std::to_string(getpid()) + "_" + std::to_string(rd());
  int fd = shm_open(name->c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return nullptr;
  const size_t bytes = tableBytes(size);
  // Allocated now, not on first touch: a /dev/shm too small for it fails here
  // (the ranks then match through gloo messages) instead of a SIGBUS later.
  void* base = ftruncate(fd, static_cast<off_t>(bytes)) == 0 && posix_fallocate(fd, 0, static_cast<off_t>(bytes)) == 0
                   ? mapTable(fd, bytes)
                   : nullptr;
  close(fd);
  if (!base) {
    shm_unlink(name->c_str());
    return nullptr;
  }
  auto t = std::unique_ptr<MatchTable>(new MatchTable(base, bytes, *name, size));
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  for (int s = 0; s < size; ++s) {
    new (t->doorbell(s)) Doorbell();
    for (int r = 0; r < size; ++r)
      if (r != s) pthread_mutex_init(&t->pair(s, r)->mu, &attr);  // the rest is zero: free entries
  }
  pthread_mutexattr_destroy(&attr);
  auto* h = static_cast<TableHeader*>(base);
  h->size = size;
  h->entries = kEntries;
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kTableMagic;
  return t;
}

std::unique_ptr<MatchTable> MatchTable::open(const std::string& name, int size) {
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return nullptr;
  struct stat st{};
  const size_t bytes = tableBytes(size);
  void* base = fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == bytes ? mapTable(fd, bytes) : nullptr;
  close(fd);
  if (!base) return nullptr;
  const auto* h = static_cast<const TableHeader*>(base);
  if (h->magic != kTableMagic || h->size != size || h->entries != kEntries) {
    munmap(base, bytes);
    return nullptr;
  }
  return std::unique_ptr<MatchTable>(new MatchTable(base, bytes, name, size));
}

void MatchTable::unlink() { shm_unlink(name_.c_str()); }

MatchTable::Pair* MatchTable::pair(int sender, int receiver) const {
  static_assert(sizeof(Pair) <= kPairBytes);
  return reinterpret_cast<Pair*>(static_cast<char*>(base_) + pairsAt(size_) +
                                 (static_cast<size_t>(sender) * size_ + receiver) * pairBytes());
}

MatchTable::Doorbell* MatchTable::doorbell(int rank) const {
  return reinterpret_cast<Doorbell*>(static_cast<char*>(base_) + doorbellsAt() + rank * kCacheLine);
}

MatchTable::Posted MatchTable::post(Side side, int me, int peer, int64_t tag, const int64_t* record) {
  const int sender = side == kSend ? me : peer, receiver = side == kSend ? peer : me;
  Posted out;
  out.source = sender;
  Pair* p = pair(sender, receiver);
  {
    Locked g(&p->mu);
    int i = oldest(p->keys, side == kSend ? kRecv : kSend, tag);
    if (i >= 0) {
      p->keys[i].state = kMatched;
      std::memcpy(p->answer[i], record, sizeof(p->answer[i]));
      std::memcpy(out.other, p->first[i], sizeof(out.other));
      out.matched = true;
      out.slot = p->keys[i].slot;
      return out;
    }
    for (int j = 0; j < kEntries && out.entry < 0; ++j)
      if (p->keys[j].state == kFree) out.entry = j;
    if (out.entry < 0) {
      out.full = true;
      return out;
    }
    out.slot = p->next_slot++;
    p->keys[out.entry] = Key{kOpen, side, tag, p->next_order++, out.slot};
    std::memcpy(p->first[out.entry], record, sizeof(p->first[out.entry]));
  }
  if (side == kSend) ring(receiver);  // a receive from any rank may be waiting for it
  return out;
}

MatchTable::Posted MatchTable::takeAnySend(int me, int64_t tag, const int64_t* record) {
  Posted out;
  for (int s = 0; s < size_; ++s) {
    if (s == me) continue;
    Pair* p = pair(s, me);
    Locked g(&p->mu);
    int i = oldest(p->keys, kSend, tag);
    if (i < 0) continue;
    p->keys[i].state = kMatched;
    std::memcpy(p->answer[i], record, sizeof(p->answer[i]));
    std::memcpy(out.other, p->first[i], sizeof(out.other));
    out.matched = true;
    out.slot = p->keys[i].slot;
    out.source = s;
    return out;
  }
  return out;
}

bool MatchTable::settle(Side side, int me, int peer, int entry, int64_t* other) {
  const int sender = side == kSend ? me : peer, receiver = side == kSend ? peer : me;
  Pair* p = pair(sender, receiver);
  bool matched;
  {
    Locked g(&p->mu);
    matched = p->keys[entry].state == kMatched;
    if (matched) std::memcpy(other, p->answer[entry], sizeof(p->answer[entry]));
    p->keys[entry].state = kFree;
  }
  // Room again: either side may be waiting for it.
  ring(sender);
  ring(receiver);
  return matched;
}

uint32_t MatchTable::generation(int me) const { return doorbell(me)->generation.load(); }

void MatchTable::ring(int rank) {
  Doorbell* d = doorbell(rank);
  d->generation.fetch_add(1);
  if (d->waiters.load() > 0)  // no system call when nobody sleeps
    syscall(SYS_futex, word(&d->generation), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void MatchTable::sleep(int me, uint32_t seen, std::chrono::nanoseconds at_most) {
  Doorbell* d = doorbell(me);
  // Counted before the last look at the word (both sequentially consistent, as
  // ring()'s increment and its look at `waiters`): either ring() sees this
  // waiter and wakes it, or this look sees the change and does not sleep.
  d->waiters.fetch_add(1);
  if (d->generation.load() == seen) {
    timespec ts{static_cast<time_t>(at_most.count() / 1000000000), static_cast<long>(at_most.count() % 1000000000)};
    syscall(SYS_futex, word(&d->generation), FUTEX_WAIT, seen, &ts, nullptr, 0);  // shared: not FUTEX_PRIVATE
  }
  d->waiters.fetch_sub(1);
}

}  // namespace neuron_sim::distributed
