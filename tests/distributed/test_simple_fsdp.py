"""SimpleFSDP on the neuron backend: parameters held as DTensor shards,
all-gathered in forward and reduce-scattered in backward inside graphs
compiled with torch.compile(backend="neuron"). 5 steps on 2 ranks equal
single-process CPU training; Dynamo's graphs_with_collectives counter and
torch.neuron.get_dynamo_metrics() report the graphs with collectives."""
import pytest

from dist_harness import run_ranks
import workers


def test_simple_fsdp_compiled_trains_like_cpu():
    results = run_ranks("simple_fsdp_compiled", 2, module="fsdp_workers.py", deadline=300)
    reference = workers.cpu_losses()
    for rank, r in enumerate(results):
        assert r["losses"] == pytest.approx(reference, rel=1e-5, abs=1e-6), (rank, r["losses"], reference)
        # forward (all-gathers) and backward (reduce-scatters) graphs both hold collectives
        assert r["graphs_with_collectives"] >= 2, r
        assert r["metrics_with_collectives"] == r["graphs_with_collectives"], r
        # the collectives of the compiled graphs ran on the neuron backend
        calls = {op: c["calls"] for op, c in r["counts"].items()}
        assert sum(n for op, n in calls.items() if "allgather" in op) >= 5, calls
        assert sum(n for op, n in calls.items() if "reduce_scatter" in op) >= 5, calls
        assert r["shard"] == ("DTensor", (8, 8), f"neuron:{rank}"), r["shard"]
