"""PyTorch's whole OpInfo database on `neuron` against the CPU (opinfo_suite.py).

`make test` (CI): float32 and bfloat16, forward and backward, 3 samples an
op. `make test-deep` (NEURON_SIM_OPINFO=deep): also float16 and int32, every
reference input. The test fails on any crash, on any cell worse than the
committed docs/op-coverage.md, on a difference that docs/op-coverage.md does
not explain, and when a pass rate drops below the issue's targets.
`make op-coverage` reruns the deep suite and rewrites the table.
"""
import os
from pathlib import Path

import pytest

import opinfo_suite as suite
from explanations import EXPLAINED

DOC = Path(__file__).resolve().parents[2] / "docs" / "op-coverage.md"
DEEP = os.environ.get("NEURON_SIM_OPINFO", "") in ("deep", "write")
WRITE = os.environ.get("NEURON_SIM_OPINFO", "") == "write"

# The targets, as fractions of the ops the CPU runs.
TARGETS = {"fwd": {"float32": 0.995, "bfloat16": 0.99}, "bwd": 0.98}


def _config():
    if DEEP:
        return suite.Config(dtypes=suite.DEEP_DTYPES, max_samples=None, task_timeout=600.0)
    return suite.Config()


@pytest.fixture(scope="module")
def run():
    cfg = _config()
    only = os.environ.get("NEURON_SIM_OPINFO_OPS")
    if only:
        cfg.ops = only.split(",")
    result = suite.run_suite(cfg)
    if WRITE:
        DOC.write_text(suite.render_table(result, cfg.dtypes, EXPLAINED,
                                          "deep (every reference input)" if DEEP else "CI (3 samples an op)"))
    print(f"\nOpInfo suite: {len(result.results)} entries in {result.seconds:.0f} s, "
          f"{result.restarts} worker restart(s)")
    for (d, dr), (p, n, c) in suite.rates(result.results, cfg.dtypes).items():
        print(f"  {d:<9} {dr}: {p}/{n} = {100.0 * p / max(n, 1):.2f} %   crashes {c}")
    return result


def test_no_op_crashes_the_process(run):
    crashes = [f"{k} {c[0]} {c[1]}: {r.detail}" for k, row in run.results.items() for c, r in row.items()
               if r.status == suite.CRASH]
    assert not crashes, "ops that crashed or hung a worker:\n" + "\n".join(crashes)


def test_no_regression_against_the_committed_table(run):
    committed = suite.parse_table(DOC.read_text())
    assert committed, f"{DOC} has no table: run `make op-coverage`"
    bad = suite.regressions(run, committed)
    assert not bad, "cells worse than docs/op-coverage.md:\n" + "\n".join(bad)


def test_every_difference_is_explained(run):
    missing = [f"{k} {c[0]} {c[1]}: {r.status} ({r.detail[:120]})" for k, row in run.results.items()
               for c, r in row.items() if r.status in (suite.MISMATCH, suite.ERROR)
               and (k, c[1]) not in EXPLAINED and k not in EXPLAINED]
    assert not missing, "differences without an explanation in tests/opinfo/explanations.py:\n" + "\n".join(missing)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_pass_rate_reaches_the_target(run, dtype, direction):
    passed, compared, _ = suite.rates(run.results, (dtype,))[(dtype, direction)]
    target = TARGETS[direction][dtype] if direction == "fwd" else TARGETS[direction]
    assert compared > 400, f"only {compared} ops compared: the suite lost most of op_db"
    assert passed / compared >= target, f"{dtype} {direction}: {passed}/{compared} < {target:.1%}"
