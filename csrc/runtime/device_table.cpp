#include "runtime/device_table.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <stdexcept>

namespace neuron_sim::runtime {
namespace {

constexpr uint64_t GiB = 1ull << 30;

const std::vector<Profile>& profiles() {
  static const std::vector<Profile> all = {
      {"trn1", 2, 1, {1}, 32 * GiB, 16, "trn1.32xlarge"},
      {"trn2", 8, 2, {1, 2}, 96 * GiB, 16, "trn2.48xlarge"},
      {"trn3", 8, 2, {1, 2}, 144 * GiB, 16, "a 16-chip trn3 instance"},
  };
  return all;
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

long parseInt(const char* name, const char* value) {
  char* end = nullptr;
  long v = std::strtol(value, &end, 10);
  if (end == value || *end != '\0')
    throw std::runtime_error(std::string(name) + "='" + value + "' is not an integer");
  return v;
}

}  // namespace

std::vector<int> parseCoreList(const std::string& spec) {
  std::vector<int> cores;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto dash = item.find('-');
    try {
      if (dash == std::string::npos) {
        cores.push_back(std::stoi(item));
      } else {
        int lo = std::stoi(item.substr(0, dash)), hi = std::stoi(item.substr(dash + 1));
        if (hi < lo) throw std::invalid_argument("range");
        for (int c = lo; c <= hi; ++c) cores.push_back(c);
      }
    } catch (const std::logic_error&) {
      throw std::runtime_error("NEURON_RT_VISIBLE_CORES='" + spec +
                               "' is not a list of core ids or ranges such as '0-1,3'");
    }
  }
  return cores;
}

DeviceTable readDeviceTable() {
  DeviceTable t;
  std::string name = env("NEURON_SIM_PROFILE") ? env("NEURON_SIM_PROFILE") : "trn2";
  auto it = std::find_if(profiles().begin(), profiles().end(),
                         [&](const Profile& p) { return p.name == name; });
  if (it == profiles().end())
    throw std::runtime_error("NEURON_SIM_PROFILE='" + name + "' is not a known profile; use trn1, trn2 or trn3");
  t.profile = *it;

  t.lnc = t.profile.default_lnc;
  if (const char* v = env("NEURON_LOGICAL_NC_CONFIG")) {
    t.lnc = static_cast<int>(parseInt("NEURON_LOGICAL_NC_CONFIG", v));
    const auto& ok = t.profile.allowed_lnc;
    if (std::find(ok.begin(), ok.end(), t.lnc) == ok.end())
      throw std::runtime_error("NEURON_LOGICAL_NC_CONFIG=" + std::string(v) + " is not supported on " +
                               t.profile.name + (t.profile.name == "trn1" ? " (only 1)" : " (1 or 2)"));
  }
  const bool chips_given = env("NEURON_SIM_CHIPS") != nullptr;
  if (chips_given) {
    t.chips = static_cast<int>(parseInt("NEURON_SIM_CHIPS", env("NEURON_SIM_CHIPS")));
    if (t.chips < 1) throw std::runtime_error("NEURON_SIM_CHIPS must be at least 1");
  }
  // Each logical core owns an equal share of its chip's HBM.
  t.hbm_per_device = t.profile.hbm_bytes_per_chip / t.logicalCoresPerChip();
  if (const char* v = env("NEURON_SIM_HBM_GB")) {
    char* end = nullptr;
    double gb = std::strtod(v, &end);
    if (end == v || *end != '\0' || gb <= 0)
      throw std::runtime_error(std::string("NEURON_SIM_HBM_GB='") + v + "' must be a positive number of GiB");
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
  if (const char* v = env("NEURON_RT_VISIBLE_CORES")) {
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
    if (const char* v = env("NEURON_RT_NUM_CORES")) {
      n = static_cast<int>(parseInt("NEURON_RT_NUM_CORES", v));
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
