#include "runtime/environment.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace neuron_sim::runtime {

std::string envValue(const char* name) {
  const char* v = std::getenv(name);
  std::string s = v ? v : "";
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  s.erase(s.begin(), std::find_if_not(s.begin(), s.end(), space));
  s.erase(std::find_if_not(s.rbegin(), s.rend(), space).base(), s.end());
  return s;
}

bool envFlag(const char* name, bool default_value) {
  std::string v = envValue(name);
  if (v.empty()) return default_value;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

bool runtimeSwitch(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] == '1' && v[1] == '\0';
}

}  // namespace neuron_sim::runtime
