// Calls into the runtime from the ATen layer. The runtime (plain C++) reports
// errors as standard exceptions; PyTorch code expects c10 errors, which
// Python sees as the matching exception types:
//   std::out_of_range (a device index)  ->  RuntimeError, as TorchNeuron's C++
//                                          set_device raises it ("Device index 20
//                                          is out of range. Valid range is 0 to 7
//                                          for this process")
//   std::invalid_argument               ->  ValueError
//   any other std::exception            ->  RuntimeError
#pragma once
#include <c10/util/Exception.h>

#include <exception>
#include <stdexcept>

namespace neuron_sim {

template <typename F>
auto runtimeCall(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const c10::Error&) {
    throw;
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  } catch (const std::exception& e) {
    TORCH_CHECK(false, e.what());
  }
}

}  // namespace neuron_sim
