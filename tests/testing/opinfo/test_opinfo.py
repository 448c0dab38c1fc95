"""PyTorch's whole OpInfo database on `neuron` against the CPU (opinfo_suite.py).

`make test` (CI) runs one shard: the OpInfo entries with crc32(name) % 8 ==
the number of commits in the checkout % 8 (consecutive commits rotate through
the eighths; a rerun of the same commit runs the same one; the run prints
which, and NEURON_SIM_OPINFO_SHARD=i/n picks one), plus the entries that once
crashed the process, in float32 and bfloat16, forward and backward, 3 samples
an op. The whole op_db takes the time docs/op-coverage.md's Run line gives,
too long for CI's 20 minutes in total; `make test-deep`
(NEURON_SIM_OPINFO=deep) runs every entry, and also float16 and int32.
`make op-coverage` (NEURON_SIM_OPINFO=write) runs the deep suite and rewrites
docs/op-coverage.md.

Every run fails on any crash, on any cell worse than the committed table, on a
pass rate below the committed table's for the same entries, on a cell where the
device newly accepts what the CPU rejects, and on a difference
tests/testing/opinfo/explanations.py does not explain (keyed by op, dtype and
direction). The project's targets (opinfo_suite.TARGETS) are printed beside the
run's rates, and docs/op-coverage.md shows whether its table meets them.
"""
import os
import subprocess
from pathlib import Path

import pytest

import opinfo_suite as suite
from explanations import EXPLAINED

DOC = Path(__file__).resolve().parents[3] / "docs" / "op-coverage.md"
MODE = os.environ.get("NEURON_SIM_OPINFO", "")
DEEP = MODE in ("deep", "write")
WRITE = MODE == "write"
SHARDS = suite.CI_SHARDS

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
        i, n = commit_count() % SHARDS, SHARDS
    return suite.Config(shard=(i, n), always=ONCE_CRASHED)


def commit_count() -> int:
    """Commits in the checkout (0 outside git): the CI shard's rotation."""
    try:
        out = subprocess.run(["git", "rev-list", "--count", "HEAD"], cwd=DOC.parent, capture_output=True,
                             text=True, timeout=30)
        return int(out.stdout.strip()) if out.returncode == 0 else 0
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return 0


def _which(cfg) -> str:
    return "every entry" if cfg.shard is None else (
        f"shard {cfg.shard[0]}/{cfg.shard[1]} (NEURON_SIM_OPINFO_SHARD={cfg.shard[0]}/{cfg.shard[1]} reruns it) "
        f"+ {len(cfg.always)} entries always run")


@pytest.fixture(scope="module")
def run():
    cfg = _config()
    only = os.environ.get("NEURON_SIM_OPINFO_OPS")
    if only:
        cfg.ops = only.split(",")
    print(f"\nOpInfo suite: {_which(cfg)}", flush=True)
    result = suite.run_suite(cfg)
    result.which, result.dtypes = _which(cfg), cfg.dtypes
    if WRITE:
        DOC.write_text(suite.render_table(result, cfg.dtypes, EXPLAINED, "every OpInfo entry, 3 samples an op"))
    print(f"OpInfo suite: {len(result.results)} entries ({result.which}) in {result.seconds:.0f} s, "
          f"{result.restarts} worker restart(s)")
    for (d, dr), x in suite.rates(result.results, cfg.dtypes).items():
        target = suite.TARGETS.get((d, dr))
        print(f"  {d:<9} {dr}: {x.passed}/{x.compared} = {100.0 * x.rate:.2f} %   unsupported {x.unsupported}   "
              f"crashes {x.crashes}   device accepts what the CPU rejects {x.lenient}"
              + (f"   target {100.0 * target:.1f} %" if target else ""))
    return result


def test_the_run_covers_op_db(run):
    # a harness that loses its ops must not pass by comparing nothing
    minimum = 600 if DEEP else 40
    assert len(run.results) >= minimum, f"only {len(run.results)} OpInfo entries ran ({run.which})"


def test_no_op_crashes_the_process(run):
    crashes = [f"{k} {c[0]} {c[1]}: {r.detail}" for k, row in run.results.items() for c, r in row.items()
               if r.status == suite.CRASH]
    assert not crashes, f"ops that crashed or hung a worker ({run.which}):\n" + "\n".join(crashes)


def test_no_regression_against_the_committed_table(run):
    committed = suite.parse_table(DOC.read_text())
    assert committed, f"{DOC} has no table: run `make op-coverage`"
    bad = suite.regressions(run, committed)
    assert not bad, f"cells worse than docs/op-coverage.md ({run.which}):\n" + "\n".join(bad)


def test_pass_rates_do_not_fall_below_the_committed_table(run):
    """The ratchet: per dtype and direction, the pass rate over the entries
    this run covers may not fall below the committed table's for them."""
    below = suite.rates_below(run, suite.parse_table(DOC.read_text()), run.dtypes)
    assert not below, f"pass rates below docs/op-coverage.md ({run.which}):\n" + "\n".join(below)


def test_every_difference_is_explained(run):
    missing = [f"{k} {c[0]} {c[1]}: {r.status} ({r.detail[:120]})" for k, row in run.results.items()
               for c, r in row.items() if r.status in suite.DIFFERENCES and r.status != suite.CRASH
               and suite.explanation(EXPLAINED, k, *c) is None]
    assert not missing, (f"differences without an explanation in tests/testing/opinfo/explanations.py, keyed by "
                         f"(op, dtype, direction) ({run.which}):\n" + "\n".join(missing))



def test_every_explanation_is_of_a_difference_in_the_committed_table():
    """An explanation names one cell (op, dtype, direction) that differs in
    docs/op-coverage.md: none for cells that pass, none left over."""
    committed = suite.parse_table(DOC.read_text())
    stale = [key for key in EXPLAINED if not (isinstance(key, tuple) and len(key) == 3)
             or committed.get(key[0], {}).get(key[1:]) not in suite.DIFFERENCES]
    assert not stale, "explanations of no difference in docs/op-coverage.md:\n" + "\n".join(map(str, stale))
