#include "aten/execution/op_table.h"

#include "aten/execution/dtype_policy.h"

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

// The 37 view and metadata names the real backend's C++ fallback never
// records (docs/native-ops.md, "Never tracked").
const std::unordered_set<std::string>& untrackedNames() {
  static const std::unordered_set<std::string> names = {
      "view", "reshape", "flatten", "squeeze", "unsqueeze", "transpose", "permute", "select", "slice",
      "narrow", "split", "chunk", "expand", "expand_as", "as_strided", "unfold", "diagonal",
      "diagonal_backward", "view_as_real", "view_as_complex", "real", "imag", "conj", "_conj",
      "_neg_view", "alias", "detach", "view_as", "reshape_as", "t", "mT", "mH", "adjoint", "movedim",
      "moveaxis", "swapaxes", "swapdims"};
  return names;
}

std::unordered_map<std::string, HostKernel>& hostKernels() {
  static auto* kernels = new std::unordered_map<std::string, HostKernel>();
  return *kernels;
}

bool isNative(const Table& t, const OpEntry& e) { return t.native.count(e.name) || t.native.count(e.base); }

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
    slot->name = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
    slot->native = isNative(t, *slot);
    auto hk = hostKernels().find(slot->name);
    if (hk != hostKernels().end()) slot->host_kernel = hk->second;
    slot->draws_host_default = name.name == "aten::native_dropout";
    auto colons = name.name.find("::");
    slot->untracked = untrackedNames().count(name.name.substr(colons == std::string::npos ? 0 : colons + 2)) > 0;
    const auto& args = op.schema().arguments();
    for (size_t i = 0; i < args.size(); ++i) {
      const auto& type = args[i].type();
      auto opt = type->cast<c10::OptionalType>();
      if ((opt ? opt->getElementType() : type)->kind() == c10::TypeKind::GeneratorType)
        slot->generator_args.push_back(i);
    }
    readDtypeFacts(*slot, op.schema());
  }
  cache.emplace(key, slot.get());
  return *slot;
}

void setNativeOps(const std::vector<std::string>& names) {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  t.native = std::unordered_set<std::string>(names.begin(), names.end());
  for (auto& [key, e] : t.entries) e->native = isNative(t, *e);
}

std::vector<std::string> untrackedOpNames() { return {untrackedNames().begin(), untrackedNames().end()}; }

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
    if (x || f) out.push_back({e->name, x, f});
  }
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
  }
}

std::vector<OpStats> opStats() {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  std::vector<OpStats> out;
  for (auto& [key, e] : t.entries) {
    OpStats s{e->name, e->native.load(), e->executed.load(), e->fallbacks.load(), e->downcasts_f64.load(),
              e->downcasts_i64.load(), 0, e->cache_hits.load()};
    {
      std::lock_guard<std::mutex> sg(e->signatures_mu);
      s.compilations = e->signatures.size();
    }
    if (s.executed || s.fallbacks || s.downcasts_f64 || s.downcasts_i64 || s.compilations) out.push_back(std::move(s));
  }
  return out;
}

void forEachOpEntry(void (*f)(OpEntry&)) {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  for (auto& [key, e] : t.entries) f(*e);
}

void registerHostKernel(const std::string& name, HostKernel kernel) { hostKernels()[name] = kernel; }

}  // namespace neuron_sim
