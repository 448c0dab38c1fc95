#include "runtime/device_timeline.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "runtime/device_table.h"

namespace neuron_sim::runtime {
namespace {

struct StreamClocks {
  int64_t free_at_ns = 0;  // trace clock: when the last event on the stream ends
  int64_t busy_ns = 0;     // model clock: modelled time spent so far
};

struct State {
  std::mutex mu;
  std::vector<DeviceEvent> log;
  uint64_t log_base = 0;  // index of log[0] (the log is dropped when the last recorder leaves)
  uint32_t recorders = 0;
  bool model_clock = false;
  std::map<std::pair<int, int64_t>, StreamClocks> clocks;
  std::shared_ptr<const CostModel> model;
  std::unordered_set<std::string> names;
};

State& state() {
  static State* s = new State();  // leaked: used until process exit, from any thread
  return *s;
}

std::atomic<uint64_t> g_model_generation{0};

constexpr size_t kWarmLogEvents = size_t{1} << 16;  // about 7 MB of events

void updateUsers(State& s) { g_timeline_users.store(s.recorders + (s.model_clock ? 1 : 0)); }

CostModel defaultModel() {
  const DeviceTable& t = deviceTable();
  return CostModel(t.profile.name, t.lnc);
}

}  // namespace

int64_t wallNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void addRecorder() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  ++s.recorders;
  updateUsers(s);
}

void removeRecorder() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  if (s.recorders > 0) --s.recorders;
  if (s.recorders == 0) {
    s.log_base += s.log.size();
    s.log.clear();
    // A short recording keeps its pages for the next one (a report per
    // training step would otherwise fault them in and regrow the log each
    // time); a long one's are returned.
    if (s.log.capacity() > kWarmLogEvents) s.log.shrink_to_fit();
  }
  updateUsers(s);
}

void setModelClock(bool on) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  s.model_clock = on;
  updateUsers(s);
}

bool modelClockOn() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  return s.model_clock;
}

void setCostModel(const CostModel& m) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  s.model = std::make_shared<const CostModel>(m);
  g_model_generation.fetch_add(1);
}

uint64_t costModelGeneration() { return g_model_generation.load(std::memory_order_acquire); }

std::shared_ptr<const CostModel> costModel() {
  State& s = state();
  {
    std::lock_guard<std::mutex> g(s.mu);
    if (s.model) return s.model;
  }
  auto m = std::make_shared<const CostModel>(defaultModel());  // reads the environment: outside the lock
  std::lock_guard<std::mutex> g(s.mu);
  if (!s.model) s.model = m;
  return s.model;
}

const std::string* internName(std::string_view name) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  return &*s.names.emplace(name).first;
}

uint64_t addEvent(DeviceEvent e) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  StreamClocks& c = s.clocks[{e.device, e.stream}];
  const auto dur = static_cast<int64_t>(e.seconds * 1e9 + 0.5);
  e.start_ns = std::max(e.issue_ns, c.free_at_ns);
  e.end_ns = e.start_ns + dur;
  // A compilation holds the host, not the stream, in the trace: the emulator's
  // host never waited for it, so later kernels keep their issue times.
  if (e.kind != EventKind::kCompile) c.free_at_ns = e.end_ns;
  c.busy_ns += dur;
  if (s.recorders == 0) return s.log_base + s.log.size();
  s.log.push_back(e);
  return s.log_base + s.log.size() - 1;
}

uint64_t eventCount() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  return s.log_base + s.log.size();
}

std::vector<DeviceEvent> events(uint64_t from, uint64_t to) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  from = std::max(from, s.log_base);
  to = std::min(to, s.log_base + s.log.size());
  if (from >= to) return {};
  return {s.log.begin() + static_cast<ptrdiff_t>(from - s.log_base),
          s.log.begin() + static_cast<ptrdiff_t>(to - s.log_base)};
}

void forEachEvent(uint64_t from, uint64_t to, const std::function<void(const DeviceEvent&)>& f) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  from = std::max(from, s.log_base);
  to = std::min(to, s.log_base + s.log.size());
  for (uint64_t i = from; i < to; ++i) f(s.log[i - s.log_base]);
}

int64_t modelClockNs(int device, int64_t stream) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  auto it = s.clocks.find({device, stream});
  return it == s.clocks.end() ? 0 : it->second.busy_ns;
}

}  // namespace neuron_sim::runtime
