"""Faults get a clear error on every rank, never a hang or lost data."""
import re

import pytest
from dist_harness import run_ranks

from torch_neuron_sim import torch_versions

# Ranks on one machine agree through shared memory; NEURON_SIM_AGREEMENT=store
# makes them use the store, as ranks on several machines do.
TRANSPORTS = pytest.mark.parametrize("transport", ["shared memory", "store"])


def env_for(transport: str) -> dict:
    return {"NEURON_SIM_AGREEMENT": "store"} if transport == "store" else {}


@TRANSPORTS
def test_a_rank_that_never_arrives_fails_the_others_after_the_timeout(transport):
    results = run_ranks("missing_rank", 2, pg_timeout=2, env=env_for(transport))
    msg = results[0]
    assert "not every rank of the group reached this collective within the group's timeout" in msg, msg
    assert "all_reduce" in msg and f"{transport}: " in msg, msg
    assert "Timeout waiting for rank 1's record" in msg, msg
    seconds = float(re.search(r"after ([0-9.]+)s", msg).group(1))
    assert 1.5 <= seconds < 10, msg


@TRANSPORTS
def test_mismatches_and_unsupported_operations_raise_clear_errors(transport):
    results = run_ranks("faults", 2, pg_timeout=10, env=env_for(transport))
    for rank, r in enumerate(results):
        assert "rank 0 has float32[4, 3]; rank 1 has float32[5, 3]" in r["shape"], r["shape"]
        assert "rank 0 has float32[4]; rank 1 has bfloat16[4]" in r["dtype"], r["dtype"]
        assert "disagree on the tensors' dtype or shape" in r["hidden"] and "float32[2], ..." in r["hidden"], r
        assert "not running the same collective" in r["which"], r["which"]
        assert "uneven split sizes are not supported" in r["uneven"], r["uneven"]
        assert "BAND needs an integer or bool tensor" in r["band_float"], r["band_float"]
        assert r["in_flight_result"] == [2.0, 2.0, 2.0], r["in_flight_result"]
        # torch itself refuses monitored_barrier on any backend but gloo, before reaching ours; the
        # ProcessGroup method asks for the group's CPU backend, which a neuron-only group has not
        assert torch_versions.current().monitored_barrier_refusal in r["monitored_barrier"], r["monitored_barrier"]
        assert "No backend type associated with device type cpu" in r["pg_monitored_barrier"], r
        assert "cpu:gloo,neuron:neuron" in r["cpu_tensor"], r["cpu_tensor"]
        assert r["after"] == [3.0, 3.0, 3.0]
        assert r["mixed"] == ([3.0, 3.0], [3.0, 3.0], "cpu:gloo,neuron:neuron"), r["mixed"]
        # one segment per group (the default group and `mixed`), mapped and unlinked
        segments = r["agreement_segments"]
        assert len({name for name, _ in segments}) == (2 if transport == "shared memory" else 0), segments
        assert all(tag == "(deleted)" for _, tag in segments), segments
    assert "output list has 3 tensors; the group has 2 ranks" in results[0]["local"], results[0]["local"]
    assert "rank 0 rejected its arguments" in results[1]["local"], results[1]["local"]
    # the same while a collective of every rank is still in flight
    assert "output list has 3 tensors; the group has 2 ranks" in results[1]["local_in_flight"]
    assert "rank 1 rejected its arguments" in results[0]["local_in_flight"], results[0]["local_in_flight"]


@TRANSPORTS
def test_a_rank_that_dies_fails_the_others(transport):
    results = run_ranks("dying_rank", 2, pg_timeout=5, may_die=(1,), env=env_for(transport))
    msg = results[0]
    assert results[1] is None
    assert "neuron collective all_reduce on rank 0" in msg, msg
    # on one machine the exit is seen (rank 1's pid is gone), not waited out until the timeout
    assert "peer rank closed its connection" in msg and "rank 1" in msg, msg
    assert float(re.search(r"after ([0-9.]+)s", msg).group(1)) < 4.5, msg


def test_mismatch_in_a_group_on_a_file_store(tmp_path):
    results = run_ranks("file_store_mismatch", 2, backend=None, args=(str(tmp_path / "store"),))
    for r in results:
        assert r[0] == [3.0, 3.0, 3.0]
        assert "rank 0 has float32[4]; rank 1 has float32[5]" in r[1], r[1]


@TRANSPORTS
def test_async_collectives_raise_the_same_errors_from_wait(transport):
    results = run_ranks("async_faults", 2, pg_timeout=10, env=env_for(transport))
    for rank, r in enumerate(results):
        # ValueError, as from a synchronous call, whichever way it surfaced
        assert r["wait"].startswith("ValueError: ") and "rank 0 has float32[4, 3]; rank 1 has float32[5, 3]" in r["wait"], r
        assert r["future"].startswith("ValueError: ") and "rank 0 has float32[4]; rank 1 has float32[5]" in r["future"], r
        assert "rank 0 has float32[2]; rank 1 has float32[3]" in r["late_mismatch"], r["late_mismatch"]
        assert r["in_order"] == [[1.0 + 2 * i] * 3 for i in range(4)], r["in_order"]
    msg = results[1]["shut_down"]
    assert "neuron collective all_reduce on rank 1 failed" in msg and "shut down or aborted" in msg, msg
    assert float(re.search(r"after ([0-9.]+)s", msg).group(1)) < 5, msg
