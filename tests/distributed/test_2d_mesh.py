"""A 2-D mesh: FSDP2 over "dp" x tensor parallel over "tp" on a (2, 2)
init_device_mesh("neuron", ...) of 4 ranks; 5 steps equal single-process CPU
training."""
import pytest

from dist_harness import run_ranks
import workers


def test_fsdp2_by_tensor_parallel_trains_like_cpu():
    results = run_ranks("fsdp2_tp_2d", 4, module="fsdp_workers.py", deadline=300)
    reference = workers.cpu_losses()
    for rank, r in enumerate(results):
        assert r["mesh"] == ("neuron", (2, 2), rank // 2, rank % 2), r["mesh"]
        assert r["losses"] == pytest.approx(reference, rel=1e-5, abs=1e-6), (rank, r["losses"], reference)
