"""The c10d backend "neuron": every collective x reduce op x dtype against a
CPU reference, non-contiguous tensors, async work, coalesced and functional
collectives, object collectives, op tracking. One spawned job per world size
(processes are expensive: torch's import costs seconds each)."""
import torch.distributed as dist

from dist_harness import free_port, run_ranks


def test_backend_is_registered_for_neuron():
    assert "neuron" in dist.Backend.backend_list
    assert dist.Backend.default_device_backend_map["neuron"] == "neuron"
    assert dist.Backend.backend_capability["neuron"] == ["neuron"]


def test_default_backend_is_neuron_and_compiled_collectives_are_counted():
    results = run_ranks("default_backend", 2, backend=None, args=(free_port(),))
    # The collective ran on the neuron backend (which alone counts collectives). dist.get_backend()
    # answers "undefined" here, as torch 2.13 does for every accelerator (CUDA's nccl included)
    # when neither a backend nor a device_id is given: the group picks the device's backend
    # lazily, and the answer comes from torch's own bookkeeping, which the real backend does not change.
    assert [r[1] for r in results] == [[2.0, 2.0]] * 2
    assert [r[2] for r in results] == ["neuron"] * 2
    assert [r[8] for r in results] == [{"c10d::allreduce_": {"calls": 1, "bytes": 8}}] * 2
    assert [r[0] for r in results] == ["undefined"] * 2
    # init_process_group(device_id=torch.device("neuron", rank)) and no backend: "neuron"
    assert [r[9] for r in results] == [("neuron", [3.0, 3.0])] * 2
    # torch.compile(backend="neuron") of a functional all_reduce: right values, and the graph
    # counted in Dynamo's graphs_with_collectives as the real backend counts it.
    assert [r[3:6] for r in results] == [([6.0] * 3, 1, 1)] * 2
    # The migration report lists the collective with its bytes and the line that issued it.
    for r in results:
        (entry,) = r[6]
        assert (entry["op"], entry["count"], entry["bytes"]) == ("c10d::allreduce_", 1, 8)
        assert [s["site"].rsplit("/", 1)[-1] for s in entry["sites"]][0].startswith("workers.py:")
        assert "Collectives (c10d backend 'neuron'): 1 call(s)" in r[7]


def test_every_collective_matches_cpu_reference():
    results = run_ranks("collectives", 3, deadline=240)
    for rank, r in enumerate(results):
        assert r["bad"] == [], f"rank {rank}: " + "\n".join(r["bad"])
        # every dtype the device has, the float8 and complex ones included, went through every collective
        assert {"torch.float8_e5m2", "torch.float8_e4m3fn", "torch.complex64", "torch.complex128", "torch.float64",
                "torch.bfloat16", "torch.bool"} <= set(r["dtypes"])
        assert r["backend"] == "neuron" and r["name"] == "neuron"
        for op in ("c10d::allreduce_", "c10d::_allgather_base_", "c10d::_reduce_scatter_base_",
                   "c10d::alltoall_base_", "c10d::broadcast_", "c10d::barrier"):
            assert op in r["executed"], (op, r["executed"])
        counts = r["counts"]
        assert counts["c10d::barrier"]["calls"] >= 1
        assert counts["c10d::allreduce_"]["bytes"] >= 1 << 20


def test_collective_buffers_count_in_hbm_accounting():
    """Staging buffers are device allocations (they raise the peak, and are released when the
    collective completes); outputs a collective allocates count while they live; a collective
    on contiguous tensors into a preallocated output allocates nothing."""
    ws, f32 = 2, 4
    results = run_ranks("hbm_accounting", ws)
    for rank, r in enumerate(results):
        assert r == {
            "all_gather_into_tensor": (0, 0),
            "all_reduce": (0, 0),
            "all_reduce_transposed": (64 * 128 * f32, 0),
            "all_reduce_int16": (4096 * 4, 0),
            "reduce_scatter_tensor": (ws * 1024 * f32, 0),
            "funcol_all_gather": (ws * 1024 * f32, ws * 1024 * f32),
            "funcol_all_gather_freed": (0, -ws * 1024 * f32),
        }, (rank, r)
