#include "runtime/device_table.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>

#include "runtime/environment.h"

namespace neuron_sim::runtime {
namespace {

constexpr uint64_t GiB = 1ull << 30;
// More HBM than a process's address space (128 TiB) can ever reserve.
constexpr double kMaxHbmGiB = 1 << 17;

const std::vector<Profile>& profiles() {
  static const std::vector<Profile> all = {
      {"trn1", 2, 1, {1}, 32 * GiB, 16, "trn1.32xlarge"},
      {"trn2", 8, 2, {1, 2}, 96 * GiB, 16, "trn2.48xlarge"},
      {"trn3", 8, 2, {1, 2}, 144 * GiB, 16, "a 16-chip trn3 instance"},
  };
  return all;
}

// An int, whole value only: a value out of int's range is refused, not wrapped
// (NEURON_SIM_CHIPS=4294967297 must not become 1 chip).
int parseInt(const char* name, const char* value) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(value, &end, 10);
  if (end == value || *end != '\0')
    throw std::runtime_error(std::string(name) + "='" + value + "' is not an integer");
  if (errno == ERANGE || v < INT_MIN || v > INT_MAX)
    throw std::runtime_error(std::string(name) + "='" + value + "' is out of range");
  return static_cast<int>(v);
}

// No machine has this many logical cores: a core id above it is refused
// before a range like "0-2147483647" is spelled out core by core.
constexpr int kMaxCoreId = 1 << 16;

// A core id: decimal digits only ("1x" and "1-2-3" are not lists of ids).
int parseCoreId(const std::string& item, const std::string& spec) {
  if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos)
    throw std::runtime_error("NEURON_RT_VISIBLE_CORES='" + spec +
                             "' is not a list of core ids or ranges such as '0-1,3'");
  if (item.size() > 9 || std::stoi(item) > kMaxCoreId)
    throw std::runtime_error("NEURON_RT_VISIBLE_CORES='" + spec + "' names core " + item +
                             ", beyond any machine's cores");
  return std::stoi(item);
}

}  // namespace

std::vector<int> parseCoreList(const std::string& spec) {
  std::vector<int> cores;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto dash = item.find('-');
    if (dash == std::string::npos) {
      cores.push_back(parseCoreId(item, spec));
    } else {
      int lo = parseCoreId(item.substr(0, dash), spec), hi = parseCoreId(item.substr(dash + 1), spec);
      if (hi < lo)
        throw std::runtime_error("NEURON_RT_VISIBLE_CORES='" + spec + "' has the range '" + item +
                                 "', whose end is below its start");
      for (int c = lo; c <= hi; ++c) cores.push_back(c);
    }
  }
  return cores;
}

DeviceTable readDeviceTable() {
  DeviceTable t;
  std::string name = envValue("NEURON_SIM_PROFILE");
  if (name.empty()) name = "trn2";
  auto it = std::find_if(profiles().begin(), profiles().end(),
                         [&](const Profile& p) { return p.name == name; });
  if (it == profiles().end())
    throw std::runtime_error("NEURON_SIM_PROFILE='" + name + "' is not a known profile; use trn1, trn2 or trn3");
  t.profile = *it;

  t.lnc = t.profile.default_lnc;
  if (const std::string v = envValue("NEURON_LOGICAL_NC_CONFIG"); !v.empty()) {
    t.lnc = parseInt("NEURON_LOGICAL_NC_CONFIG", v.c_str());
    const auto& ok = t.profile.allowed_lnc;
    if (std::find(ok.begin(), ok.end(), t.lnc) == ok.end())
      throw std::runtime_error("NEURON_LOGICAL_NC_CONFIG=" + std::string(v) + " is not supported on " +
                               t.profile.name + (t.profile.name == "trn1" ? " (only 1)" : " (1 or 2)"));
  }
  const std::string chips = envValue("NEURON_SIM_CHIPS");
  const bool chips_given = !chips.empty();
  if (chips_given) {
    t.chips = parseInt("NEURON_SIM_CHIPS", chips.c_str());
    if (t.chips < 1) throw std::runtime_error("NEURON_SIM_CHIPS must be at least 1");
    if (t.chips > kMaxCoreId)  // chips times cores per chip must stay an int
      throw std::runtime_error("NEURON_SIM_CHIPS=" + std::to_string(t.chips) + " is more chips than any machine has");
  }
  // Each logical core owns an equal share of its chip's HBM.
  t.hbm_per_device = t.profile.hbm_bytes_per_chip / t.logicalCoresPerChip();
  if (const std::string text = envValue("NEURON_SIM_HBM_GB"); !text.empty()) {
    const char* v = text.c_str();
    char* end = nullptr;
    double gb = std::strtod(v, &end);
    // Finite and at most kMaxHbmGiB: "nan", "inf" or "1e30" would overflow the byte count.
    if (end == v || *end != '\0' || !std::isfinite(gb) || gb <= 0 || gb > kMaxHbmGiB)
      throw std::runtime_error(std::string("NEURON_SIM_HBM_GB='") + v + "' must be a positive number of GiB, at most " +
                               std::to_string(static_cast<long>(kMaxHbmGiB)));
    t.hbm_per_device = static_cast<uint64_t>(gb * static_cast<double>(GiB));
  }

  // Without NEURON_SIM_CHIPS, the instance is the smallest one of the profile
  // with the cores the process asks for (NEURON_RT_NUM_CORES=8 on trn2: two
  // chips of a trn2.48xlarge), up to the profile's largest instance.
  const int per_chip = t.logicalCoresPerChip();
  auto fit = [&](int cores, const std::string& what) {
    if (chips_given || cores <= t.logicalCoresTotal()) return;
    const int largest = t.profile.max_chips * per_chip;
    if (cores > largest)
      throw std::runtime_error(what + ", but the largest " + t.profile.name + " instance (" +
                               t.profile.largest_instance + ", " + std::to_string(t.profile.max_chips) +
                               " chips) has " + std::to_string(largest) + " logical cores at LNC=" +
                               std::to_string(t.lnc) + ". Ask for fewer cores, or set NEURON_SIM_CHIPS to "
                               "simulate a machine of that size");
    t.chips = (cores + per_chip - 1) / per_chip;
  };
  if (const std::string v = envValue("NEURON_RT_VISIBLE_CORES"); !v.empty()) {
    t.visible = parseCoreList(v);
    for (int c : t.visible) {
      if (c < 0) throw std::runtime_error("NEURON_RT_VISIBLE_CORES names core " + std::to_string(c));
      fit(c + 1, "NEURON_RT_VISIBLE_CORES names core " + std::to_string(c));
      if (c >= t.logicalCoresTotal())
        throw std::runtime_error("NEURON_RT_VISIBLE_CORES names core " + std::to_string(c) + ", but this " +
                                 t.profile.name + " machine has logical cores 0 to " +
                                 std::to_string(t.logicalCoresTotal() - 1));
    }
  } else {
    int n = t.logicalCoresTotal();
    if (const std::string v = envValue("NEURON_RT_NUM_CORES"); !v.empty()) {
      n = parseInt("NEURON_RT_NUM_CORES", v.c_str());
      if (n < 0) throw std::runtime_error("NEURON_RT_NUM_CORES=" + std::string(v) + " must not be negative");
      fit(n, "NEURON_RT_NUM_CORES=" + std::string(v));
      if (n > t.logicalCoresTotal())
        throw std::runtime_error("NEURON_RT_NUM_CORES=" + std::string(v) + " but this " + t.profile.name +
                                 " machine has " + std::to_string(t.logicalCoresTotal()) + " logical cores");
    }
    for (int c = 0; c < n; ++c) t.visible.push_back(c);
  }
  if (t.count() > kMaxDevices)
    throw std::runtime_error("the simulated machine exposes " + std::to_string(t.count()) +
                             " logical NeuronCores, but PyTorch device indices are 8-bit: at most " +
                             std::to_string(kMaxDevices) + " devices per process. Use NEURON_RT_VISIBLE_CORES "
                             "or fewer NEURON_SIM_CHIPS");
  return t;
}

const DeviceTable& deviceTable() {
  static const DeviceTable table = readDeviceTable();
  return table;
}

}  // namespace neuron_sim::runtime
