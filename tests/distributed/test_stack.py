"""The PyTorch stack on the neuron backend: DDP (buckets, no_sync,
find_unused_parameters), FSDP2 (fp32 and bf16 mixed precision), tensor
parallel, DTensor redistribution, distributed checkpointing. 5 training steps
of each equal single-process CPU training (loss per step within the dtype's
tolerance)."""
import pytest
import torch

from dist_harness import run_ranks
import workers


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    ckpt = str(tmp_path_factory.mktemp("dcp"))
    results = run_ranks("stack", 2, args=(ckpt,), deadline=240)
    return results, ckpt


@pytest.fixture(scope="module")
def reference():
    return workers.cpu_losses()


@pytest.mark.parametrize("kind,tol", [("ddp", 1e-5), ("ddp_unused", 1e-5), ("fsdp2", 1e-5), ("tp", 1e-5),
                                      ("fsdp2_bf16", 3e-2)])
def test_training_matches_single_process_cpu(stack, reference, kind, tol):
    results, _ = stack
    for rank, r in enumerate(results):
        assert r[kind] == pytest.approx(reference, rel=tol, abs=tol), (kind, rank, r[kind], reference)
    # the steps did change the weights (the loss moves from step to step)
    assert len({round(v, 6) for v in results[0][kind]}) == len(reference)


def test_ddp_no_sync_skips_the_allreduce_and_accumulates_as_on_cpu(stack):
    results, _ = stack
    first, total = workers.cpu_no_sync_grads(len(results))
    for rank, r in enumerate(results):
        info = r["ddp_no_sync"]
        # a synced backward all-reduces its buckets: one in the first step (DDP's first bucket
        # is 1 MiB), several once DDP has rebuilt them to bucket_cap_mb (tiny). Inside no_sync
        # nothing is reduced; the next backward reduces every bucket once.
        assert info["step 0"] == 1 and info["step 1"] >= 2 and info["step 3"] == info["step 1"], info
        assert info["inside"] == 0, info
        assert info["after"] == info["step 1"], info
        # inside no_sync each rank keeps its own gradient (ranks' shards differ); after the
        # synced backward every rank has the mean of the accumulated gradients
        for got, want in zip(info["grads_inside"], first[rank]):
            assert torch.allclose(torch.tensor(got), want, rtol=1e-4, atol=1e-6), (rank, got, want)
        for got, want in zip(info["grads_after"], total):
            assert torch.allclose(torch.tensor(got), want, rtol=1e-4, atol=1e-6), (rank, got, want)
    assert not torch.allclose(torch.tensor(results[0]["ddp_no_sync"]["grads_inside"][0]),
                              torch.tensor(results[1]["ddp_no_sync"]["grads_inside"][0]))


def test_dtensor_redistribution_round_trips(stack):
    results, _ = stack
    for rank, r in enumerate(results):
        assert r["dtensor"] == [], (rank, r["dtensor"])


def test_checkpoint_saved_on_two_ranks_loads_on_one(stack):
    import torch.distributed.checkpoint as dcp

    _, ckpt = stack
    model = workers.mlp()
    expected = {k: v + 1.0 for k, v in model.state_dict().items()}
    state = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    dcp.load(state, checkpoint_id=ckpt)  # no process group: a single-process load
    for k in expected:
        assert torch.equal(state[k], expected[k]), k
