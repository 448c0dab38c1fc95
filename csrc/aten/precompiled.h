// The torch headers most files outside runtime/ include, compiled once per build into a
// precompiled header (setup.py). Parsing them took about 7 of the 12 s of CPU a small ATen glue
// file costs to compile (docs/building.md). GCC uses a precompiled header only when it is the
// first #include of a file, so every file that reaches torch includes this one first; the file's
// own includes stay as they were (it still names what it uses). Without the precompiled copy
// (the sanitizer build) this is an ordinary header.
// A guard, not #pragma once: the header is compiled on its own, where GCC warns about that pragma.
#ifndef NEURON_SIM_ATEN_PRECOMPILED_H
#define NEURON_SIM_ATEN_PRECOMPILED_H
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#endif  // NEURON_SIM_ATEN_PRECOMPILED_H
