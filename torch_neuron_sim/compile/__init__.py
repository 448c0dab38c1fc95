"""torch.compile(model, backend="neuron"): the real backend's compile
semantics on the emulator — docs/compile.md.

  backend.py          the Dynamo backend (entry point) and AOTAutograd set-up
  options.py          mode / options
  static_shapes.py    "Dynamic shapes detected..." for any symbolic dimension
  compiler.py         one graph's compile phases, graph-level fallback
  retarget.py         FX pass: 64-bit narrowing, host graphs onto the device
  graph_check.py      which ops the device can compile
  neff_cache.py       the persistent NEFF cache
  executors.py        Inductor / op-by-op executors and the launch wrapper
  inductor_device.py  Inductor's CPU code generation for the neuron device
  dynamo_metrics.py   NeuronCompilationMetrics, Dynamo counters and phases
  graphs.py           compiled-graph records for the migration report

Importing this package does not import Dynamo; torch.compile loads the
backend on first use."""
from .dynamo_metrics import (  # noqa: F401
    NeuronCompilationMetrics, add_listener, get_dynamo_metrics, reset_dynamo_metrics,
)
from .graphs import GraphRecord, graph_breaks, records  # noqa: F401
