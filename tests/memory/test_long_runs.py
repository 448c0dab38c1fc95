"""Long runs keep memory flat (tests/memory/long_run_workload.py, in a fresh
interpreter each). A training loop: host RSS and arena use at a tenth of the
run and at its end (`make test`: 1,000 steps; `make test-deep`, with
NEURON_SIM_LONG_RUN=deep: 10,000), and `torch.neuron.empty_cache()` after it
gives the arena back whole. Small ops under a migration report and under
torch's profiler (`make test`: 20,000; deep: 1,000,000): what each holds per
op while active, within the bounds docs/memory.md states."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DEEP = os.environ.get("NEURON_SIM_LONG_RUN") == "deep"
MiB = 2**20

# The bounds docs/memory.md ("Long runs") states.
TRAIN_RSS_GROWTH = 16 * MiB  # between a tenth of the loop and its end
REPORT_BYTES_PER_OP = 512  # its device-timeline events, held until it stops
PROFILER_BYTES_PER_OP = 16 * 1024  # torch's own event records, plus the device's rows
REPORT_JSON_BYTES = 4 * MiB  # the report's output, whatever the run's length


def run(kind: str, n: int) -> dict:
    r = subprocess.run([sys.executable, str(HERE / "long_run_workload.py"), kind, str(n)], capture_output=True,
                       text=True, timeout=3600 if DEEP else 900)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_training_loop_keeps_rss_and_the_arena_flat_and_empty_cache_returns_everything():
    steps = 10_000 if DEEP else 1_000
    out = run("train", steps)
    early, late = out["marks"][str(steps // 10)], out["marks"][str(steps)]
    assert late["allocated"] == early["allocated"] and late["reserved"] == early["reserved"], out
    assert late["rss"] - early["rss"] <= TRAIN_RSS_GROWTH, out
    assert out["after_empty_cache"] == [0, 0], out


@pytest.mark.parametrize("under,per_op", [("report", REPORT_BYTES_PER_OP), ("profiler", PROFILER_BYTES_PER_OP)])
def test_many_ops_under_a_report_or_the_profiler_hold_bounded_memory(under, per_op):
    n = 1_000_000 if DEEP else 20_000
    if under == "profiler" and DEEP:
        n = 100_000  # torch's profiler keeps every event it records; its cost per op is what is checked
    out = run(under, n)
    assert out["counted"] == n and out["value"] == 16 * (1000 + n), out
    assert out["rss_during"] - out["rss_before"] <= per_op * n + 16 * MiB, out
    if under == "report":
        assert out["report_json_bytes"] <= REPORT_JSON_BYTES, out
        assert out["rss_after"] - out["rss_before"] <= per_op * n + 16 * MiB, out  # nor more once it stopped
