"""Where random numbers on neuron come from, as in the release: ops that run on the device
(dropout, SDPA's dropout) draw from the device's generator, the fallback's random ops from
the CPU stream; NEURON_SIM_RNG=cpu keeps every draw on the CPU stream; the generators
torch.neuron hands out."""
import pytest
import torch
import torch.nn.functional as F

from torch_neuronx_user import D, torch_neuronx, copy_entry_points_restored, neuronx_alias  # noqa: F401 (fixtures)


def _offset(device=0):
    return int.from_bytes(bytes(torch.neuron.get_rng_state(device)[8:].tolist()), "little")


def test_random_tensors_on_neuron_are_drawn_from_the_cpu_stream():
    # randn, rand, randint are not native: the fallback runs them on the CPU,
    # drawing from the CPU generator, as the release's fallback does.
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
    assert torch.equal(torch.neuron.get_rng_state(), before)  # a fallback op leaves the device generator alone


def test_dropout_draws_from_the_device_generator():
    x = torch.ones(10, 10, device=D)
    torch.neuron.manual_seed(3)
    torch.default_generator.manual_seed(1)
    out, mask = torch.native_dropout(x, 0.4, True)
    assert _offset() == 100  # one number per element, in whole Philox blocks of 4
    f = F.dropout(torch.ones(3, 3, device=D), 0.4, training=True)
    assert _offset() == 100 + 12
    cpu_state = torch.default_generator.get_state()
    torch.neuron.manual_seed(3)
    torch.default_generator.manual_seed(2)  # another CPU stream changes nothing on the device
    out2, mask2 = torch.native_dropout(x, 0.4, True)
    assert torch.equal(out2.cpu(), out.cpu()) and torch.equal(mask2.cpu(), mask.cpu())
    assert torch.equal(F.dropout(torch.ones(3, 3, device=D), 0.4, training=True).cpu(), f.cpu())
    torch.default_generator.manual_seed(1)
    assert torch.equal(torch.default_generator.get_state(), cpu_state)  # dropout did not consume the CPU stream
    torch.manual_seed(3)
    cpu_out, cpu_mask = torch.native_dropout(x.cpu(), 0.4, True)
    assert not torch.equal(cpu_mask, mask.cpu())  # not the CPU's mask: another stream


def test_dropout_masks_resume_from_a_saved_state_and_per_device():
    x = torch.ones(64, device=D)
    torch.neuron.manual_seed(8)
    F.dropout(x, 0.5)
    saved = torch.neuron.get_rng_state()
    masks = [F.dropout(x, 0.5).cpu() for _ in range(3)]
    torch.neuron.set_rng_state(saved)
    assert all(torch.equal(F.dropout(x, 0.5).cpu(), m) for m in masks)
    torch.neuron.set_rng_state(saved)
    with torch.random.fork_rng(devices=[0], device_type="neuron"):
        F.dropout(x, 0.5)
    assert torch.equal(F.dropout(x, 0.5).cpu(), masks[0])
    # each device has its own generator: dropout on neuron:1 leaves neuron:0's offset alone
    torch.neuron.manual_seed_all(8)
    F.dropout(torch.ones(64, device="neuron:1"), 0.5)
    assert _offset(0) == 0 and _offset(1) == 64


def test_dropout_masks_equal_cpu_native_dropout(cpu_stream):
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


def test_sdpa_dropout_draws_from_the_device_generator():
    q = torch.randn(1, 2, 8, 4, device=D)
    torch.neuron.manual_seed(5)
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert _offset() == 1 * 2 * 8 * 8  # one number per attention weight
    torch.neuron.manual_seed(5)
    torch.default_generator.manual_seed(77)
    b = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert torch.equal(a.cpu(), b.cpu())
    state = torch.default_generator.get_state()
    c = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert torch.equal(torch.default_generator.get_state(), state)  # the CPU stream was not consumed
    assert not torch.equal(c.cpu(), a.cpu())  # the device stream moved on


def test_sdpa_dropout_draws_from_the_cpu_stream(cpu_stream):
    q = torch.randn(1, 2, 8, 4, device=D)
    torch.manual_seed(5)
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    after = torch.randn(3)
    torch.manual_seed(5)
    b = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert torch.equal(a.cpu(), b.cpu())
    assert torch.equal(torch.randn(3), after)


def test_rng_source_from_the_environment(monkeypatch):
    from torch_neuron_sim.devices import random as rng

    assert rng.rng_source() == "device"  # the default, as the release
    try:
        monkeypatch.setenv("NEURON_SIM_RNG", "cpu")
        rng._install()
        assert rng.rng_source() == "cpu"
        x = torch.randn(50)
        torch.manual_seed(3)
        mask = torch.native_dropout(x.to(D), 0.5, True)[1]
        torch.manual_seed(3)
        assert torch.equal(mask.cpu(), torch.native_dropout(x, 0.5, True)[1])
        monkeypatch.setenv("NEURON_SIM_RNG", "gpu")
        with pytest.raises(ValueError, match="NEURON_SIM_RNG='gpu': use 'device'"):
            rng._install()
        assert rng.rng_source() == "cpu"  # a bad value changes nothing
    finally:
        rng.set_rng_source("device")


def test_generators_as_on_the_device():
    g = torch.Generator(device=D)  # the generator API stays
    g.manual_seed(4)
    assert g.get_state().numel() == 16
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator but found 'neuron'"):
        torch.rand(3, device=D, generator=g)  # the CPU fallback checks its generator
    cpu_gen = torch.Generator().manual_seed(9)
    r = torch.rand(3, device=D, generator=cpu_gen)
    assert torch.equal(r.cpu(), torch.rand(3, generator=torch.Generator().manual_seed(9)))


