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
  dynamo_metrics.py   torch.neuron.get_dynamo_metrics(): the records under torch_neuronx's names, phases
  graphs.py           the one record of each compiled graph (report, metrics, counters)
  selection.py        backend auto-selection on neuron tensors; per-shape recompiles
  random_ops.py       FX pass: a graph's random ops draw from the device generator

Importing this package does not import Dynamo; torch.compile loads the
backend on first use."""
from .dynamo_metrics import NeuronCompilationMetrics, add_listener, get_dynamo_metrics, reset_dynamo_metrics  # noqa: F401
from .graphs import GraphRecord, graph_breaks, records  # noqa: F401
from . import selection as _selection

_selection.install()
