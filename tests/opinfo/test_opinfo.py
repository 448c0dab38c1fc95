"""PyTorch's whole OpInfo database on `neuron` against the CPU (opinfo_suite.py).

`make test` (CI) runs one shard: the OpInfo entries with crc32(name) % 8 ==
the day number % 8 (a different eighth each day, the same one all day; set
NEURON_SIM_OPINFO_SHARD=i/n to pick one), plus the entries that once crashed
the process, in float32 and bfloat16, forward and backward, 3 samples an
op. The whole op_db takes the time docs/op-coverage.md's Run line gives, too
long for CI's 20 minutes in total; `make test-deep`
(NEURON_SIM_OPINFO=deep) runs every entry, and also float16 and int32.
`make op-coverage` (NEURON_SIM_OPINFO=write) runs the deep suite and rewrites
docs/op-coverage.md.

Every run fails on any crash, on any cell worse than the committed table and
on a difference tests/opinfo/explanations.py does not explain. The project's
targets (opinfo_suite.TARGETS) are printed beside the run's rates, and
docs/op-coverage.md shows whether its table meets them.
"""
import datetime
import os
from pathlib import Path

import pytest

import opinfo_suite as suite
from explanations import EXPLAINED

DOC = Path(__file__).resolve().parents[2] / "docs" / "op-coverage.md"
MODE = os.environ.get("NEURON_SIM_OPINFO", "")
DEEP = MODE in ("deep", "write")
WRITE = MODE == "write"
SHARDS = 8

# Entries that crashed the interpreter before (SIGSEGV): in every CI shard.
ONCE_CRASHED = ("fft.ifft", "fft.hfft", "fft.hfft2", "fft.hfftn", "fft.ihfft", "fft.ihfftn", "linalg.eig",
                "linalg.eigvals", "polar", "histc", "nn.functional.mse_loss", "nn.functional.smooth_l1_loss")

def _config():
    if DEEP:
        return suite.Config(dtypes=suite.DEEP_DTYPES, task_timeout=600.0, progress=True)
    spec = os.environ.get("NEURON_SIM_OPINFO_SHARD")
    if spec:
        i, n = (int(x) for x in spec.split("/"))
    else:
        i, n = datetime.date.today().toordinal() % SHARDS, SHARDS
    return suite.Config(shard=(i, n), always=ONCE_CRASHED)


@pytest.fixture(scope="module")
def run():
    cfg = _config()
    only = os.environ.get("NEURON_SIM_OPINFO_OPS")
    if only:
        cfg.ops = only.split(",")
    result = suite.run_suite(cfg)
    if WRITE:
        DOC.write_text(suite.render_table(result, cfg.dtypes, EXPLAINED, "every OpInfo entry, 3 samples an op"))
    shard = "" if cfg.shard is None else f" (shard {cfg.shard[0]}/{cfg.shard[1]} + {len(cfg.always)} always)"
    print(f"\nOpInfo suite: {len(result.results)} entries{shard} in {result.seconds:.0f} s, "
          f"{result.restarts} worker restart(s)")
    for (d, dr), (p, n, c, u) in suite.rates(result.results, cfg.dtypes).items():
        target = suite.TARGETS.get((d, dr))
        print(f"  {d:<9} {dr}: {p}/{n} = {100.0 * p / max(n, 1):.2f} %   unsupported {u}   crashes {c}"
              + (f"   target {100.0 * target:.1f} %" if target else ""))
    return result


def test_the_run_covers_op_db(run):
    # a harness that loses its ops must not pass by comparing nothing
    minimum = 600 if DEEP else 40
    assert len(run.results) >= minimum, f"only {len(run.results)} OpInfo entries ran"


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
               for c, r in row.items() if r.status in suite.DIFFERENCES and r.status != suite.CRASH
               and (k, c[1]) not in EXPLAINED and k not in EXPLAINED]
    assert not missing, "differences without an explanation in tests/opinfo/explanations.py:\n" + "\n".join(missing)

