// Native ops whose CPU kernel lacks a dtype the device computes the op in.
//
// A native op runs PyTorch's CPU kernel on arena memory. Where that kernel
// has no case for a dtype the device computes the op in (histc on int32:
// '"histogram_cpu" not implemented for 'Int''; TorchNeuron's histc takes any
// integer input), the op is computed in a wider dtype the kernel has and cast
// back, on the host. Where the device is not known to compute the op in the
// dtype (gelu, softmax, transposed conv... on integers: every PyTorch kernel refuses
// them, the CPU's and CUDA's alike), the CPU kernel's error stands: the
// device's fallback retries on that kernel and fails the same way.
// docs/dtype-widening.md lists both, from a sweep of op_db.
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/Exception.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aten/execution/op_table.h"

namespace neuron_sim {

// The dtype named by a CPU kernel's dispatch error ("... not implemented for
// 'Int'"), if it is a device dtype; nullopt for any other error.
std::optional<at::ScalarType> widenableDtype(const c10::NotImplementedError& err);

// Runs the CPU kernel of `op` on `args` (host aliases) with every tensor of
// dtype `from` widened, casting the results back to `from`, and pushes the
// results on `stack`. Returns false, pushing nothing, when no wider dtype has
// a kernel either (the caller rethrows the original error).
bool runWidened(const c10::OperatorHandle& op, OpEntry& e, torch::jit::Stack* stack, c10::ArrayRef<c10::IValue> args,
                at::ScalarType from);

// Native ops (by name) whose CPU kernel lacked a device dtype the device is not
// known to compute them in, so the CPU's error was raised: name -> ScalarType
// bits, since the process started (the sweep behind docs/dtype-widening.md).
std::vector<std::pair<std::string, uint64_t>> cpuErrorDtypes();

// The CPU kernel of a native op, on the host aliases at the top of `stack`,
// whose dtypes are `dtype_bits` (CallFacts); widens and retries when the
// kernel lacks the dtype (above). Decided once per (op, dtype): later calls
// in a dtype the kernel has cost one mask test.
void runCpuKernel(const c10::OperatorHandle& op, OpEntry& e, torch::jit::Stack* stack, uint64_t dtype_bits);

}  // namespace neuron_sim
