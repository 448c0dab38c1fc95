// An op dispatched while a compiled graph launches (inGraphLaunch,
// compile_cache.h) is part of that graph: the device's compiler lowered it
// with the rest of the graph, so it runs on the device when the compiler has
// a lowering for it, whether or not the device runs it natively in eager mode
// (Inductor's extern call to aten::sort.stable, an in-place zero_ through a
// strided view in a custom op's body). Only what has no lowering falls back.
// The lowering set is the compile path's own (torch_neuron_sim/compile/
// graph_check.py), asked once per op through a function bindings install.
#pragma once
#include <string>

#include "aten/execution/op_table.h"

namespace neuron_sim {

// Answers for one op by its name ("aten::sort.stable"); must not raise.
using LoweringQuery = bool (*)(const std::string& name);
void setLoweringQuery(LoweringQuery query);

// Whether the device compiler lowers the op: the query's answer, kept in the
// op's entry. False while no query is installed (nothing compiled yet).
bool compilerLowers(OpEntry& e);

}  // namespace neuron_sim
