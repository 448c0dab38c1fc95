// Native ops whose CPU kernel lacks a dtype the device computes in.
//
// A native op runs PyTorch's CPU kernel on arena memory, but the device
// compiles every op for each dtype it has (float32, float16, bfloat16, int8,
// int16, int32, int64, uint8, bool: docs/semantics.md). Where the CPU kernel
// has no case for one of them (histc on int32: '"histogram_cpu" not
// implemented for 'Int''), the op is computed in a wider dtype the kernel has
// and cast back, on the host; docs/dtype-widening.md lists the ops found.
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/Exception.h>

#include <optional>

#include "aten/execution/op_table.h"

namespace neuron_sim {

// The dtype named by a CPU kernel's dispatch error ("... not implemented for
// 'Int'"), if the device computes in it; nullopt for any other error.
std::optional<at::ScalarType> widenableDtype(const c10::NotImplementedError& err);

// Runs the CPU kernel of `op` on `args` (host aliases) with every tensor of
// dtype `from` widened, casting the results back to `from`, and pushes the
// results on `stack`. Returns false, pushing nothing, when no wider dtype has
// a kernel either (the caller rethrows the original error).
bool runWidened(const c10::OperatorHandle& op, OpEntry& e, torch::jit::Stack* stack, c10::ArrayRef<c10::IValue> args,
                at::ScalarType from);

// The CPU kernel of a native op, on the host aliases at the top of `stack`;
// widens and retries when the kernel lacks the dtype (above). Decided once
// per (op, dtype): later calls in a dtype the kernel has cost one mask test.
void runCpuKernel(const c10::OperatorHandle& op, OpEntry& e, torch::jit::Stack* stack);

}  // namespace neuron_sim
