// The simulated Trainium machine: which profile, how many logical NeuronCores
// this process sees, and how much HBM each one has. Plain C++, no torch.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace neuron_sim::runtime {

// One Trainium generation, with the figures of AWS's Neuron architecture
// pages (the table in docs/memory.md, "Profiles").
struct Profile {
  std::string name;             // "trn1", "trn2", "trn3"
  int physical_cores_per_chip;  // NeuronCores on one chip
  int default_lnc;              // logical NeuronCore config the runtime picks
  std::vector<int> allowed_lnc; // values NEURON_LOGICAL_NC_CONFIG may take
  uint64_t hbm_bytes_per_chip;
  int max_chips;                // chips of the profile's largest instance
  std::string largest_instance; // its name, for messages
};

// The device table is read once from the environment, on first use.
struct DeviceTable {
  Profile profile;
  int lnc = 1;                  // physical cores per logical core
  int chips = 1;
  uint64_t hbm_per_device = 0;  // bytes of HBM one logical core owns
  std::vector<int> visible;     // logical core ids this process sees, in order

  int count() const { return static_cast<int>(visible.size()); }
  int logicalCoresPerChip() const { return profile.physical_cores_per_chip / lnc; }
  int logicalCoresTotal() const { return logicalCoresPerChip() * chips; }
};

// PyTorch device indices are 8-bit; the real runtime refuses more at init.
constexpr int kMaxDevices = 128;

// Parses the environment (NEURON_SIM_PROFILE, NEURON_LOGICAL_NC_CONFIG,
// NEURON_SIM_CHIPS, NEURON_SIM_HBM_GB, NEURON_RT_VISIBLE_CORES,
// NEURON_RT_NUM_CORES). Throws std::runtime_error with a clear message on a
// bad value.
DeviceTable readDeviceTable();

// The process-wide table, built on first call (and rebuilt by resetForTesting).
const DeviceTable& deviceTable();

// Parses "0-1,4,6-7" as NEURON_RT_VISIBLE_CORES does.
std::vector<int> parseCoreList(const std::string& spec);

}  // namespace neuron_sim::runtime
