"""How many distinct ATen operators the parity suites exercise, read from the
backend's own op tracking (what reached the neuron dispatch key, natively or
through the fallback). Every case runs once here, on the table path; the
test fails when coverage drops under the floor."""
import importlib

import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import torch_neuron_sim
from _cases import _data  # noqa: F401  (the registry the suites share)

SUITES = ["test_pointwise", "test_reductions", "test_linalg", "test_conv", "test_indexing", "test_shape", "test_nn",
          "test_modules", "test_optim"]
FLOOR = 200  # distinct ATen operators (base names, "aten::add"), overloads folded


def _run_once(case):
    @settings(max_examples=1, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def once(data):
        case(data)
    once()


def _exercised() -> dict[str, set[str]]:
    """Runs every case once; returns {ATen base name: {overloads seen}}."""
    seen: dict[str, set[str]] = {}
    for name in SUITES:
        for case in importlib.import_module(name).CASES:
            torch_neuron_sim.clear_op_tracking()
            _run_once(case)
            for op in torch_neuron_sim.get_op_counts():
                seen.setdefault(op.split(".")[0], set()).add(op)
    return seen


def test_parity_suites_cover_at_least_200_aten_ops():
    seen = _exercised()
    aten = {name for name in seen if name.startswith("aten::")}
    # Each name is a real operator in the dispatcher (not a label we made up).
    for name in aten:
        overload = next(iter(seen[name])).partition(".")[2]
        torch._C._dispatch_find_schema_or_throw(name, overload)
    assert len(aten) >= FLOOR, (
        f"the parity suites exercise {len(aten)} distinct ATen operators, fewer than {FLOOR}:\n"
        + ", ".join(sorted(aten)))
    print(f"\n{len(aten)} distinct ATen operators exercised ({sum(len(v) for v in seen.values())} overloads)")
