#pragma once
// Where a native call's tensors and generators are, as the device checks them
// before running it (its Python ops check this before anything else): every
// tensor input on one NeuronCore (0-dim CPU tensors aside), or the device's
// message; an in-place op's output contiguous; a neuron generator only for an op on neuron;
// the device's generators in place of the CPU's for random ops that run on the device.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "aten/execution/call_facts.h"
#include "aten/execution/op_table.h"
#include "aten/neuron.h"

namespace neuron_sim {

inline bool onNeuron(const at::Tensor& t) { return t.defined() && t.device().type() == kNeuron; }

// A CPU op reaches the boxed kernel when only its generator is a neuron one
// (the generator's dispatch key joins the op's key set): refused, as cuda does.
void checkGeneratorPlacement(const c10::OperatorHandle& op, const CallFacts& facts);

// The op's generator arguments become host generators drawing the device's
// next numbers (not under NEURON_SIM_RNG=cpu).
void useDeviceGenerators(const OpEntry& e, torch::jit::Stack* stack, size_t first, int device);

// The walk's placement verdict applied: true to run natively, false when the
// op's rule sends such a call to the CPU fallback; otherwise the device's error.
bool checkInputs(const c10::OperatorHandle& op, const OpEntry& e, const torch::jit::Stack& stack,
                 const CallFacts& facts);

// Where an in-place op writes (OpEntry::in_place): the device's kernels write
// contiguous outputs only, so for a non-contiguous view (m[:, 3].add_(2)) its
// implementation fails: false, the op falls back to the CPU, which writes
// through the view; under TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1
// the device's error. A view whose elements overlap stays native: the CPU
// kernel refuses it in PyTorch's words.
bool writesContiguously(const c10::OperatorHandle& op, const OpEntry& e, const torch::jit::Stack& stack);

}  // namespace neuron_sim
