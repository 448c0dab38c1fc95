"""Point-to-point on the neuron backend: send, recv, isend, irecv, recv from
any rank and batch_isend_irecv, over gloo's send/recv on views of the device
memory; every device dtype, tags, non-contiguous tensors; recorded like the
collectives; sizes that differ and a peer that never posts are errors. Each
runs twice: matched in shared memory (ranks on one machine) and with header
and ready messages over gloo (ranks on several machines, forced by
NEURON_SIM_AGREEMENT=store)."""

import pytest

from dist_harness import run_ranks


# How the ranks match sends with receives: the shared-memory table, or gloo messages.
TRANSPORTS = {"shared memory": {}, "messages": {"NEURON_SIM_AGREEMENT": "store"}}


@pytest.fixture(scope="module", params=list(TRANSPORTS))
def results(request):
    return run_ranks("point_to_point", 2, module="p2p_workers.py", deadline=240, env=TRANSPORTS[request.param])


def test_messages_arrive_intact(results):
    for rank, r in enumerate(results):
        assert r["bad"] == [], (rank, r["bad"])
    assert results[0]["any_source"] == (1, [7.0, 7.0, 7.0])
    assert [r["batch"] for r in results] == [[2.0] * 5, [1.0] * 5]
    assert results[1]["mixed_sources"] == [(0, [2.0 * i, 2.0 * i + 1], True) for i in range(8)]
    assert results[1]["in_order"] == [float(v) for v in range(40)]


def test_contiguous_tensors_travel_in_place_and_staging_counts_in_hbm(results):
    # peak: the 64x128 float32 staging copy of the transposed tensor; nothing left after
    for r in results:
        assert r["hbm"] == (64 * 128 * 4, 0), r["hbm"]


def test_recorded_like_collectives(results):
    sent, received = ("c10d::send", "c10d::recv_")
    for rank, r in enumerate(results):
        assert r["counts"] == {sent: {"calls": 1, "bytes": 32}, received: {"calls": 1, "bytes": 32}}, r["counts"]
        assert sent in r["executed"] and received in r["executed"], r["executed"]
        p2p, collectives, text = r["report"]
        assert {(e["op"], e["count"], e["bytes"]) for e in p2p} == {(sent, 1, 32), (received, 1, 32)}, p2p
        assert all(s["site"].rsplit("/", 1)[-1].startswith("p2p_workers.py:") for e in p2p for s in e["sites"])
        assert collectives == []  # not mixed into the collectives
        assert "Point-to-point (send/recv on the c10d backend 'neuron'): 2 call(s)" in text, text
        assert "pre-release neuron backend had no point-to-point" in text, text
        # one device event each on the rank's device
        assert r["events"] == [("recv", rank, 32), ("send", rank, 32)], r["events"]


@pytest.fixture(scope="module", params=list(TRANSPORTS))
def faults(request):
    return run_ranks("p2p_faults", 2, module="p2p_workers.py", pg_timeout=2, env=TRANSPORTS[request.param])


def test_sizes_that_differ_fail_both_ranks_naming_both(faults):
    both = "rank 0 sent float32[4] (16 bytes); rank 1 receives into float32[5, 2] (40 bytes)"
    assert faults[0]["sizes"].startswith("ValueError: neuron send on rank 0 to rank 1 (tag 9)"), faults[0]
    assert faults[1]["sizes"].startswith("ValueError: neuron recv on rank 1 from rank 0 (tag 9)"), faults[1]
    for r in faults:
        assert both in r["sizes"], r["sizes"]
    assert faults[1]["after"] == [2.0] * 4  # the tag is usable afterwards


def test_bad_arguments_are_refused_on_the_calling_rank(faults):
    for rank, r in enumerate(faults):
        # torch refuses a send to oneself before the backend is asked
        assert "destination rank should not be the same as the rank of the current process" in r["self"], r["self"]
        assert "tag 1073741824 is outside [0, 536870912)" in r["tag"], r["tag"]
        assert "cpu:gloo,neuron:neuron" in r["cpu"], r["cpu"]


def test_a_peer_that_never_posts_fails_after_the_timeout_naming_peer_and_tag(faults):
    recv, send = faults[0]["never"], faults[1]["never"]
    assert "neuron recv on rank 0 from rank 1 (tag 7) failed: rank 1 posted no matching send" in recv, recv
    assert "neuron send on rank 1 to rank 0 (tag 8) failed: rank 0 posted no matching recv" in send, send
    for r in faults:
        assert r["never"].startswith("DistBackendError"), r["never"]
        assert "within the group's timeout (2000 ms)" in r["never"], r["never"]
        assert 1.5 <= r["seconds"] < 10, r["seconds"]
