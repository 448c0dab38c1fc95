"""Pipeline parallelism on the neuron backend: torch.distributed.pipelining's
stages exchange activations and gradients by send/recv (batch_isend_irecv).
pipeline() with a SplitPoint and manual PipelineStages; GPipe, 1F1B,
interleaved 1F1B (two stages per rank) and interleaved zero bubble on 2 ranks.
Each rank's gradients and the last stage's loss equal the single-process CPU
run of the same model within float32 tolerance."""
import pytest

from dist_harness import run_ranks

SCHEDULES = ["pipeline() + GPipe", "GPipe", "1F1B", "Interleaved1F1B", "InterleavedZeroBubble"]


# Sends matched with receives in shared memory (ranks on one machine), or by gloo messages.
@pytest.fixture(scope="module", params=["shared memory", "messages"])
def results(request):
    env = {"NEURON_SIM_AGREEMENT": "store"} if request.param == "messages" else {}
    return run_ranks("pipelines", 2, module="pipeline_workers.py", deadline=240, env=env)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_schedule_trains_like_cpu(results, schedule):
    held = []
    for rank, r in enumerate(results):
        got = r[schedule]
        assert got["grad_err"] < 1e-5, (schedule, rank, got)
        held += got["params"]
        if rank == len(results) - 1:  # the last stage is on the last rank in every layout here
            assert got["loss_err"] < 1e-5, (schedule, got)
        else:
            assert "loss_err" not in got
    # between them the ranks hold every parameter once
    assert sorted(held) == sorted(f"{b}.0.{w}" for b in range(4) for w in ("weight", "bias")), held


def test_pipeline_stages_run_on_the_rank_device(results):
    assert [r["stage device"] for r in results] == ["neuron:0", "neuron:1"]
