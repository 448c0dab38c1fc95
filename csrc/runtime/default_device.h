// The process default device. A thread's current device (device.h,
// currentDevice) is its own choice, made through a device guard, or else this
// default, which torch_neuronx's set_device sets too: a thread started after
// set_device(2) sees device 2.
#pragma once

namespace neuron_sim::runtime {

void setDefaultDevice(int index);  // this thread's device and the process default

}  // namespace neuron_sim::runtime
