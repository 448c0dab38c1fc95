// What every ATen glue file shares: the device type neuron is registered as.
// Kept lean: each file including it compiles against torch headers.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/Device.h>

namespace neuron_sim {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;

inline c10::Device neuronDevice(int index) {
  return c10::Device(kNeuron, static_cast<c10::DeviceIndex>(index));
}

}  // namespace neuron_sim
