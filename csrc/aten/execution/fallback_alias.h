// The CPU fallback of an op that only reads its inputs, without copying them
// to the host (fallback_alias.cpp).
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace neuron_sim {

// Runs the op's CPU kernel on host aliases of its neuron inputs (arena
// memory is host memory: reading it in place reads the bytes a copy would
// hold) and copies its results to `device`, as cpu_fallback does; the
// input copies it skips are counted as made. False, with the stack
// untouched, when the call needs cpu_fallback itself: the op writes an
// argument or returns an alias, takes a device argument, an input's copy
// would differ from it (strided, conjugate or negative bit), or anything
// watches copies (a copy router, an active migration report, recorded
// device events, RecordFunction callbacks, adaptive eager).
bool fallbackReadingInPlace(const c10::OperatorHandle& op, torch::jit::Stack* stack, int device);

}  // namespace neuron_sim
