#include "op_table.h"

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

// The view and metadata ops the real backend's fallback never records (facts §2d).
const std::unordered_set<std::string>& untrackedNames() {
  static const std::unordered_set<std::string> names = {
      "view", "reshape", "flatten", "squeeze", "unsqueeze", "transpose", "permute", "select", "slice",
      "narrow", "split", "chunk", "expand", "expand_as", "as_strided", "unfold", "diagonal",
      "diagonal_backward", "view_as_real", "view_as_complex", "real", "imag", "conj", "_conj",
      "_neg_view", "alias", "detach", "view_as", "reshape_as", "t", "mT", "mH", "adjoint", "movedim",
      "moveaxis", "swapaxes", "swapdims"};
  return names;
}

bool isNative(const Table& t, const OpEntry& e) { return t.native.count(e.name) || t.native.count(e.base); }

std::atomic<FallbackMode> g_mode{FallbackMode::kWarn};
void (*g_announce)(const std::string&) = nullptr;

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
    auto colons = name.name.find("::");
    slot->untracked = untrackedNames().count(name.name.substr(colons == std::string::npos ? 0 : colons + 2)) > 0;
    const auto& args = op.schema().arguments();
    for (size_t i = 0; i < args.size(); ++i) {
      const auto& type = args[i].type();
      auto opt = type->cast<c10::OptionalType>();
      auto inner = opt ? opt->getElementType() : type;
      if (inner->kind() == c10::TypeKind::GeneratorType) slot->generator_args.push_back(i);
    }
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
  }
}

void setFallbackMode(FallbackMode mode) { g_mode = mode; }
FallbackMode fallbackMode() { return g_mode.load(std::memory_order_relaxed); }
void setFallbackAnnouncer(void (*announce)(const std::string&)) { g_announce = announce; }

void announceFallback(OpEntry& e) {
  if (e.announced.exchange(true)) return;
  if (g_announce) g_announce(e.name);
}

}  // namespace neuron_sim
