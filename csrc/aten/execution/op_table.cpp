#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "aten/execution/op_table.h"

#include "aten/execution/dtype_policy.h"
#include "aten/execution/kernel_runs.h"
#include "aten/execution/numerics.h"

#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace neuron_sim {
namespace {

struct Table {
  std::mutex mu;
  std::unordered_map<const void*, std::unique_ptr<OpEntry>> entries;
  std::unordered_set<std::string> native;
};
Table& table() {
  static Table* t = new Table();  // outlives every thread that may still dispatch at exit
  return *t;
}

// tracking.rules, as loaded by torch_neuron_sim.native_ops (empty until then).
TrackingRules& rules() {
  static auto* r = new TrackingRules();
  return *r;
}

std::unordered_map<std::string, HostKernel>& hostKernels() {
  static auto* kernels = new std::unordered_map<std::string, HostKernel>();
  return *kernels;
}

bool isNative(const Table& t, const OpEntry& e) { return t.native.count(e.name) || t.native.count(e.base); }

std::unordered_map<std::string, Precondition>& preconditions() {
  static auto* checks = new std::unordered_map<std::string, Precondition>();
  return *checks;
}

// The one place that decides whether the unboxed fast path may take an op's
// calls: it runs the op's device check (a precondition) and the CPU kernel,
// so an op with a host kernel stays on the boxed path, which runs it. Under
// the table's lock.
void refreshFastPath(OpEntry& e) {
  e.fast = e.native.load() && e.host_kernel == nullptr;
}

// The rules that concern one entry; under the table's lock.
void applyRules(OpEntry& e) {
  const TrackingRules& r = rules();
  auto rec = r.record.find(e.name);
  e.recorded = rec != r.record.end() ? rec->second : e.name;
  e.never = r.never.count(e.name) > 0;
  e.untracked = e.never.load() || r.exempt.count(e.name) > 0;
  InputCheck check = InputCheck::kAll;
  auto in = r.inputs.find(e.name);
  if (in != r.inputs.end()) {
    if (in->second == "self") check = InputCheck::kSelf;
    else if (in->second == "iterator") check = InputCheck::kIterator;
    else if (in->second == "fallback") check = InputCheck::kFallback;
  }
  e.inputs = check;
}

}  // namespace

OpEntry& opEntry(const c10::OperatorHandle& op) {
  const void* key = &op.schema();
  thread_local std::unordered_map<const void*, OpEntry*> cache;
  auto hit = cache.find(key);
  if (hit != cache.end()) return *hit->second;
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  auto& slot = t.entries[key];
  if (!slot) {
    slot = std::make_unique<OpEntry>();
    const auto& name = op.schema().operator_name();
    slot->base = name.name;
    // The one place an op's name is spelled ("aten::add.Tensor"; "aten::relu" for the default overload).
    slot->name = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
    slot->native = isNative(t, *slot);
    auto hk = hostKernels().find(slot->name);
    if (hk != hostKernels().end()) slot->host_kernel = hk->second;
    auto pre = preconditions().find(slot->name);
    if (pre != preconditions().end()) slot->precondition = pre->second;
    slot->draws_host_default = name.name == "aten::native_dropout";
    slot->formula = runtime::formulaOf(slot->name);
    applyRules(*slot);
    const auto& args = op.schema().arguments();
    slot->in_place = !args.empty() && args[0].alias_info() != nullptr && args[0].alias_info()->isWrite() &&
                     args[0].type()->kind() == c10::TypeKind::TensorType;
    for (size_t i = 0; i < args.size(); ++i) {
      const auto& type = args[i].type();
      auto opt = type->cast<c10::OptionalType>();
      if ((opt ? opt->getElementType() : type)->kind() == c10::TypeKind::GeneratorType)
        slot->generator_args.push_back(i);
    }
    readDtypeFacts(*slot, op.schema());
    readNumericsFacts(*slot);
    refreshFastPath(*slot);
  }
  cache.emplace(key, slot.get());
  return *slot;
}

void setNativeOps(const std::vector<std::string>& names) {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  t.native = std::unordered_set<std::string>(names.begin(), names.end());
  for (auto& [key, e] : t.entries) {
    e->native = isNative(t, *e);
    e->lowered.store(-1, std::memory_order_relaxed);
    refreshFastPath(*e);
  }
}

std::vector<std::string> untrackedOpNames() {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  return {rules().exempt.begin(), rules().exempt.end()};
}

void setTrackingRules(TrackingRules r) {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  rules() = std::move(r);
  for (auto& [key, e] : t.entries) {
    applyRules(*e);
    e->lowered.store(-1, std::memory_order_relaxed);
  }
}

OpEntry& kernelEntry(const char* name, const char* overload) {
  return opEntry(c10::Dispatcher::singleton().findSchemaOrThrow(name, overload));
}

std::vector<std::string> nativeOps() {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  return {t.native.begin(), t.native.end()};
}

std::vector<OpCount> opCounts() {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  std::vector<OpCount> out;
  for (auto& [key, e] : t.entries) {
    uint64_t x = e->executed.load(), f = e->fallbacks.load();
    if (x || f) out.push_back({e->name, e->recorded, x, f});
  }
  for (const auto& [name, n] : namedKernelRuns()) out.push_back({name, name, n, 0});
  return out;
}

void clearOpTracking() {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  for (auto& [key, e] : t.entries) {
    e->executed = 0;
    e->fallbacks = 0;
    e->downcasts_f64 = 0;
    e->downcasts_i64 = 0;
    e->widened = 0;
  }
  clearNamedKernelRuns();
}

std::vector<OpStats> opStats() {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  std::vector<OpStats> out;
  for (auto& [key, e] : t.entries) {
    OpStats s{e->name, e->native.load(), e->executed.load(), e->fallbacks.load(), e->downcasts_f64.load(),
              e->downcasts_i64.load(), 0, e->cache_hits.load(), e->widened.load(),
              e->time_ns.load(), e->copy_ns.load(), e->copied_bytes.load()};
    {
      std::lock_guard<std::mutex> sg(e->signatures_mu);
      s.compilations = e->signatures.size();
    }
    if (s.executed || s.fallbacks || s.downcasts_f64 || s.downcasts_i64 || s.compilations || s.widened) out.push_back(std::move(s));
  }
  // Kernels run by name (NKI launches) are the device's own: native.
  for (const auto& [name, n] : namedKernelRuns()) out.push_back(OpStats{name, true, n, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  return out;
}

void forEachOpEntry(void (*f)(OpEntry&)) {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  for (auto& [key, e] : t.entries) f(*e);
}

void registerHostKernel(const std::string& name, HostKernel kernel) { hostKernels()[name] = kernel; }
std::vector<std::string> hostKernelNames() {
  std::vector<std::string> out;
  for (const auto& [name, k] : hostKernels()) out.push_back(name);
  return out;
}
Precondition registerPrecondition(const std::string& name, Precondition check) {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  Precondition& slot = preconditions()[name];
  Precondition previous = slot;
  slot = check;
  for (auto& [key, e] : t.entries)
    if (e->name == name) {
      e->precondition = check;
      refreshFastPath(*e);
    }
  return previous;
}

}  // namespace neuron_sim
