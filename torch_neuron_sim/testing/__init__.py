"""torch_neuron_sim.testing: the kit for op-parity tests on `neuron`::

    from torch_neuron_sim.testing import assert_parity, strategies as nst

    @given(nst.tensors(dtype=torch.float32))
    def test_gelu(x):
        assert_parity(torch.nn.functional.gelu, x, grad=True)

`strategies` needs hypothesis (the `test` extra); everything else needs only torch.
See docs/testing.md.
"""
from __future__ import annotations

from .op_checks import (
    FallbackError, OpTracker, assert_no_fallback, assert_op_did_not_run_on_neuron, assert_op_does_not_run,
    assert_op_falls_back_on_cpu, assert_op_runs_on_neuron, check_op_runs_on_neuron, count_cpu_bounce_calls,
    get_executed_op_list, track_neuron_ops,
)
from .parity import assert_parity, dtype_rule_active, execution_path, mirror, tolerance
from .streams_mode import requires_nrt_streams

__all__ = [
    "assert_parity", "tolerance", "dtype_rule_active", "execution_path", "mirror",
    "track_neuron_ops", "OpTracker", "assert_op_runs_on_neuron", "assert_op_did_not_run_on_neuron",
    "assert_op_falls_back_on_cpu", "assert_op_does_not_run", "check_op_runs_on_neuron",
    "get_executed_op_list", "count_cpu_bounce_calls", "assert_no_fallback", "FallbackError", "strategies",
    "requires_nrt_streams",
]


def __getattr__(name: str):
    if name == "strategies":  # imported on first use: hypothesis is optional
        import importlib
        return importlib.import_module(f"{__name__}.strategies")
    raise AttributeError(name)
