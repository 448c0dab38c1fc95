// Reading the environment, one rule for the whole package: a flag is true when
// its value, spaces trimmed and in any case, is 1, true, yes or on; unset or
// empty gives the caller's default; any other value is false. Python reads its
// flags through envFlag too (torch_neuron_sim/environment.py, `_C._env_flag`),
// so C++ and Python cannot disagree on what a spelling means.
#pragma once
#include <string>

namespace neuron_sim::runtime {

// The variable's value, surrounding spaces trimmed; empty when unset.
std::string envValue(const char* name);
bool envFlag(const char* name, bool default_value = false);
// A switch of the Neuron runtime itself (NEURON_RT_*), read as the runtime
// reads it: on only when its value is exactly "1".
bool runtimeSwitch(const char* name);

}  // namespace neuron_sim::runtime
