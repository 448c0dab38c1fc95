"""Collectives of the c10d backend "neuron" on the simulated device timeline
(docs/profiling.md): one device event each under torch.profiler, on the rank's
device, with the bytes it moved, linked to its c10d op, costed as a ring."""
import pytest

from dist_harness import run_ranks
from torch_neuron_sim import profiler


def ring_us(name, nbytes, n):
    m = profiler.cost_model()
    steps, traffic = (2 * (n - 1), 2 * (n - 1) / n) if name == "all_reduce" else (n - 1, (n - 1) / n)
    if name == "barrier":
        traffic = 0
    return (steps * m["collective_latency_s"] + nbytes * traffic / m["link_bytes_per_s"]) * 1e6


def test_collectives_appear_on_the_device_timeline_with_bytes():
    world = 2
    results = run_ranks("profiled_collectives", world, module="profiler_workers.py", deadline=240)
    n = 1024 * 4  # one rank's fp32 buffer
    for rank, r in enumerate(results):
        events = {e["name"]: e for e in r["events"]}
        assert set(events) == {"all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "barrier"}, events
        # Bytes as nccl-tests counts them: the tensor, the gathered output, the scattered input.
        assert events["all_reduce"]["bytes"] == n
        assert events["all_gather_into_tensor"]["bytes"] == world * n
        assert events["reduce_scatter_tensor"]["bytes"] == world * n
        assert events["barrier"]["bytes"] == 0
        for name, e in events.items():
            assert (e["pid"], e["tid"]) == (rank, 0), e  # rank r runs on neuron:r, default stream
            assert e["modelled_us"] == pytest.approx(ring_us(name, e["bytes"], world), rel=1e-6), name
        # Linked to the c10d op that issued it; key_averages shows it as that op's device time.
        assert events["all_reduce"]["cpu_op"] == "c10d::allreduce_"
        assert r["device_us"]["c10d::allreduce_"] > 0
        assert r["values"] == [3.0, 6.0]  # 1 + 2, then the scattered sum of two such
