"""Non-native structured ops (mse_loss, smooth_l1_loss, ...) fall back by
running their functional CPU kernel, as the CPU does: no "An output with one
or more elements was resized" warning that CPU code never prints, and the
fallback is reported under the functional name."""
import warnings

import pytest
import torch
import torch.nn.functional as F

import torch_neuron_sim

N = "neuron"


@pytest.mark.parametrize("loss", [F.mse_loss, F.smooth_l1_loss, F.l1_loss, F.huber_loss])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses_match_cpu_without_a_warning(loss, reduction):
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        got = loss(a.to(N), b.to(N), reduction=reduction)
    torch.testing.assert_close(got.cpu(), loss(a, b, reduction=reduction))


def test_fallback_reported_under_the_functional_name(tracked):
    F.mse_loss(torch.randn(3).to(N), torch.randn(3).to(N))
    ops = torch_neuron_sim.get_fallback_ops()
    assert "aten::mse_loss" in ops
    assert "aten::mse_loss.out" not in ops


def test_native_out_variants_still_serve_their_functional_ops(tracked):
    # eq.Tensor has no kernel of its own; its composite calls the native eq.Tensor_out
    x = torch.arange(4.0).to(N)
    assert (x == x).all().item()
    assert not any(op.startswith("aten::eq") for op in torch_neuron_sim.get_fallback_ops())
