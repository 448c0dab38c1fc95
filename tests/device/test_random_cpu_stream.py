"""Random numbers on neuron come from the CPU stream by default, as on TorchNeuron:
random tensors, dropout masks, SDPA's dropout, and the generators torch.neuron hands out."""
import pytest
import torch
import torch.nn.functional as F

from torch_neuronx_user import D, torch_neuronx, copy_entry_points_restored, neuronx_alias  # noqa: F401 (fixtures)


def test_random_tensors_on_neuron_are_drawn_from_the_cpu_stream():
    torch.manual_seed(0)
    a, b = torch.randn(4, device=D), torch.rand(3, 2, device=D)
    c = torch.randint(0, 100, (5,), device=D)
    after = torch.randn(2)
    torch.manual_seed(0)
    assert torch.equal(a.cpu(), torch.randn(4)) and torch.equal(b.cpu(), torch.rand(3, 2))
    assert torch.equal(c.cpu(), torch.randint(0, 100, (5,)))
    assert torch.equal(torch.randn(2), after)  # the device draws consumed the CPU stream
    before = torch.neuron.get_rng_state()
    torch.randn(8, device=D)
    assert torch.equal(torch.neuron.get_rng_state(), before)  # no eager op reads the device generator


def test_dropout_masks_equal_cpu_native_dropout():
    x = torch.randn(10, 10)
    torch.manual_seed(3)
    out_d, mask_d = torch.native_dropout(x.to(D), 0.4, True)
    f_d = F.dropout(x.to(D), 0.4, training=True)
    m_d = torch.nn.Dropout(0.4)(x.to(D))
    torch.manual_seed(3)
    out_c, mask_c = torch.native_dropout(x, 0.4, True)
    f_c, m_c = torch.native_dropout(x, 0.4, True)[0], torch.native_dropout(x, 0.4, True)[0]
    assert torch.equal(mask_d.cpu(), mask_c) and torch.equal(out_d.cpu(), out_c)
    assert torch.equal(f_d.cpu(), f_c) and torch.equal(m_d.cpu(), m_c)


def test_sdpa_dropout_draws_from_the_cpu_stream():
    q = torch.randn(1, 2, 8, 4, device=D)
    torch.manual_seed(5)
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    after = torch.randn(3)
    torch.manual_seed(5)
    b = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert torch.equal(a.cpu(), b.cpu())
    assert torch.equal(torch.randn(3), after)


def test_generators_as_on_the_device():
    g = torch.Generator(device=D)  # the generator API stays
    g.manual_seed(4)
    assert g.get_state().numel() == 16
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator but found 'neuron'"):
        torch.rand(3, device=D, generator=g)  # the CPU fallback checks its generator
    cpu_gen = torch.Generator().manual_seed(9)
    r = torch.rand(3, device=D, generator=cpu_gen)
    assert torch.equal(r.cpu(), torch.rand(3, generator=torch.Generator().manual_seed(9)))
