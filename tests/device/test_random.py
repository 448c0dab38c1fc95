"""Random numbers on neuron: one default generator per device with the real
16-byte (seed, offset) state, torch.manual_seed reaching it, statistically
sound draws. Ops that run on the device (dropout) draw from the device's
generator and the fallback's from the CPU stream, as in the release
(tests/device/test_random_streams.py); with every random op on the device stream
(NEURON_SIM_RNG=all) each is reproducible and independent of the CPU
generator (the `device_stream` tests)."""
import math

import pytest
import torch

from conftest import run_python

N = torch.neuron
D = "neuron"

# The common random ops (docs/random.md), as a function of nothing but the generator state.
RANDOM_OPS = {
    "rand": lambda: torch.rand(64, device=D),
    "randn": lambda: torch.randn(64, device=D),
    "randint": lambda: torch.randint(0, 1000, (64,), device=D),
    "randperm": lambda: torch.randperm(64, device=D),
    "bernoulli": lambda: torch.bernoulli(torch.full((64,), 0.5, device=D)),
    "bernoulli_": lambda: torch.empty(64, device=D).bernoulli_(0.3),
    "dropout": lambda: torch.nn.functional.dropout(torch.ones(64, device=D), 0.5),
    "nn.Dropout": lambda: torch.nn.Dropout(0.25)(torch.ones(64, device=D)),
    "normal_": lambda: torch.empty(64, device=D).normal_(),
    "normal": lambda: torch.normal(torch.zeros(64, device=D), 1.0),
    "uniform_": lambda: torch.empty(64, device=D).uniform_(),
    "exponential_": lambda: torch.empty(64, device=D).exponential_(),
    "multinomial": lambda: torch.multinomial(torch.ones(64, device=D), 16),
    "rand_like": lambda: torch.rand_like(torch.ones(64, device=D)),
}


@pytest.mark.parametrize("name", sorted(RANDOM_OPS))
def test_device_stream_reproducible_for_a_seed_and_independent_of_the_cpu_stream(name, device_stream):
    op = RANDOM_OPS[name]
    N.manual_seed(1234)
    torch.default_generator.manual_seed(1)
    first = op().cpu()
    cpu_state = torch.default_generator.get_state()
    N.manual_seed(1234)
    torch.default_generator.manual_seed(2)  # a different CPU stream changes nothing on neuron
    assert torch.equal(op().cpu(), first)
    assert not torch.equal(op().cpu(), first)  # the stream moves on
    torch.default_generator.manual_seed(1)
    assert torch.equal(torch.default_generator.get_state(), cpu_state)  # the CPU stream was not consumed


def test_state_is_16_bytes_seed_and_offset(device_stream):
    N.manual_seed(0x0102030405060708)
    state = N.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu" and state.numel() == 16
    assert int.from_bytes(bytes(state[:8].tolist()), "little") == 0x0102030405060708
    assert int.from_bytes(bytes(state[8:].tolist()), "little") == 0  # a new seed restarts the offset
    torch.rand(4, device=D)
    assert int.from_bytes(bytes(N.get_rng_state()[8:].tolist()), "little") > 0
    assert N.initial_seed() == 0x0102030405060708


def test_get_and_set_state_replays_the_device_stream(device_stream):
    N.manual_seed(7)
    torch.randn(3, device=D)
    saved = N.get_rng_state()
    a = torch.randn(100, device=D).cpu()
    N.set_rng_state(saved)
    assert torch.equal(torch.randn(100, device=D).cpu(), a)
    # An 8-byte state sets the seed alone (offset 0), as on the real backend.
    N.set_rng_state(torch.tensor(list((7).to_bytes(8, "little")), dtype=torch.uint8))
    b = torch.randn(3, device=D).cpu()
    N.manual_seed(7)
    assert torch.equal(torch.randn(3, device=D).cpu(), b)


def test_wrong_state_size_or_dtype_is_a_clear_error():
    N.manual_seed(6)
    before = N.get_rng_state()
    with pytest.raises(RuntimeError, match="RNG state is wrong size"):
        N.set_rng_state(torch.zeros(5, dtype=torch.uint8))
    with pytest.raises(TypeError, match="RNG state must be a torch.ByteTensor"):
        N.set_rng_state(torch.zeros(16))  # float32: not silently converted
    with pytest.raises(TypeError, match="RNG state must be a torch.ByteTensor"):
        N.set_rng_state(list(range(16)))
    assert torch.equal(N.get_rng_state(), before)  # the generator is untouched and usable
    torch.nn.functional.dropout(torch.ones(8, device=D), 0.5)


def test_host_generator_advances_the_offset_by_the_numbers_drawn():
    from torch_neuron_sim.devices.random import host_generator

    N.manual_seed(21)
    g = host_generator(0, numbers=10)  # rounded up to whole Philox blocks of 4
    assert g.device.type == "cpu"
    assert int.from_bytes(bytes(N.get_rng_state()[8:].tolist()), "little") == 12
    a = torch.rand(5, generator=g)
    host_generator(0)  # one block by default
    assert int.from_bytes(bytes(N.get_rng_state()[8:].tolist()), "little") == 16
    N.manual_seed(21)
    assert torch.equal(torch.rand(5, generator=host_generator(0, numbers=10)), a)  # reproducible for a seed


def test_torch_manual_seed_seeds_every_neuron_device():
    torch.manual_seed(42)
    for i in range(N.device_count()):
        assert N.get_rng_state(i)[:8].tolist() == list((42).to_bytes(8, "little"))
    with N.device(0):
        assert N.initial_seed() == 42
    a = torch.rand(5, device=D).cpu()
    torch.manual_seed(42)
    assert torch.equal(torch.rand(5, device=D).cpu(), a)


def test_devices_have_their_own_generators(device_stream):
    N.manual_seed_all(3)
    a0 = torch.rand(8, device="neuron:0").cpu()
    a1 = torch.rand(8, device="neuron:1").cpu()
    assert torch.equal(a0, a1)  # same seed, same stream
    torch.rand(8, device="neuron:0")
    assert N.get_rng_state(0)[8:].tolist() != N.get_rng_state(1)[8:].tolist()  # offsets advance separately
    N.set_rng_state_all(N.get_rng_state_all())


def test_seed_and_seed_all_are_non_deterministic():
    N.seed()
    s1 = N.initial_seed()
    N.seed()
    assert N.initial_seed() != s1
    N.seed_all()
    assert len({tuple(N.get_rng_state(i)[:8].tolist()) for i in range(N.device_count())}) == 1


def test_initial_seed_differs_between_processes():
    code = "import torch, torch_neuron_sim; print(torch.neuron.initial_seed())"
    seeds = {run_python(code).stdout.strip() for _ in range(2)}
    assert len(seeds) == 2 and "" not in seeds


def test_device_stream_explicit_generators(device_stream):
    g = torch.Generator(device=D)
    assert g.device == torch.device("neuron:0")
    g.manual_seed(11)
    assert g.initial_seed() == 11 and g.get_state().numel() == 16
    a = torch.rand(10, device=D, generator=g).cpu()
    g.manual_seed(11)
    N.manual_seed(99)
    before = N.get_rng_state()
    assert torch.equal(torch.rand(10, device=D, generator=g).cpu(), a)
    assert torch.equal(N.get_rng_state(), before)  # the default generator was not used
    g2 = torch.Generator(device=D)
    g2.set_state(g.get_state())
    assert torch.equal(torch.randn(4, device=D, generator=g).cpu(), torch.randn(4, device=D, generator=g2).cpu())
    assert torch.Generator(device="neuron:1").device == torch.device("neuron:1")
    with pytest.raises(RuntimeError, match="Expected a 'neuron' device type for generator but found 'cpu'"):
        torch.rand(3, device=D, generator=torch.Generator())  # as cuda refuses a CPU generator
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator but found 'neuron'"):
        torch.randperm(4, generator=g)  # a CPU op with a neuron generator


def test_fork_rng_restores_neuron_state(device_stream):
    N.manual_seed(5)
    expected = torch.rand(3, device=D).cpu()
    N.manual_seed(5)
    with torch.random.fork_rng(devices=[0], device_type="neuron"):
        torch.rand(100, device=D)
    assert torch.equal(torch.rand(3, device=D).cpu(), expected)


# ---- statistics: 200k draws; bounds are > 6 standard errors wide ----------
def _moments(t):
    t = t.double().cpu()
    return t.mean().item(), t.var().item()


def test_uniform_and_normal_moments():
    N.manual_seed(0)
    n = 200_000
    u = torch.rand(n, device=D)
    assert 0 <= u.min().item() and u.max().item() < 1
    m, v = _moments(u)
    assert abs(m - 0.5) < 0.004 and abs(v - 1 / 12) < 0.002
    m, v = _moments(torch.empty(n, device=D).uniform_(-2, 6))
    assert abs(m - 2) < 0.03 and abs(v - 64 / 12) < 0.1
    m, v = _moments(torch.randn(n, device=D))
    assert abs(m) < 0.015 and abs(v - 1) < 0.02
    m, v = _moments(torch.empty(n, device=D).normal_(3.0, 0.5))
    assert abs(m - 3) < 0.008 and abs(v - 0.25) < 0.006
    z = torch.randn(n, device=D).cpu()
    assert abs((z.abs() < 1).double().mean().item() - 0.6827) < 0.007  # shape, not only moments


def test_exponential_bernoulli_and_dropout_statistics():
    N.manual_seed(1)
    n = 200_000
    e = torch.empty(n, device=D).exponential_(2.0)
    assert e.min().item() >= 0
    m, v = _moments(e)
    assert abs(m - 0.5) < 0.01 and abs(v - 0.25) < 0.01
    b = torch.bernoulli(torch.full((n,), 0.3, device=D)).cpu()
    assert set(b.unique().tolist()) <= {0.0, 1.0} and abs(b.mean().item() - 0.3) < 0.007
    x = torch.ones(n, device=D)
    y = torch.nn.functional.dropout(x, p=0.2, training=True).cpu()
    assert set(y.unique().tolist()) <= {0.0, 1.25}  # kept values are scaled by 1/(1-p)
    assert abs((y == 0).double().mean().item() - 0.2) < 0.006
    assert torch.equal(torch.nn.functional.dropout(x, p=0.2, training=False).cpu(), x.cpu())


def test_integer_draws_cover_their_range():
    N.manual_seed(2)
    r = torch.randint(3, 13, (100_000,), device=D).cpu()
    assert r.min().item() == 3 and r.max().item() == 12
    counts = torch.bincount(r - 3, minlength=10).double()
    assert (counts / counts.sum() - 0.1).abs().max().item() < 0.01
    p = torch.randperm(1000, device=D).cpu()
    assert torch.equal(p.sort().values, torch.arange(1000))
    assert not torch.equal(p, torch.arange(1000))


def test_multinomial_follows_its_weights():
    N.manual_seed(3)
    w = torch.tensor([1.0, 2.0, 3.0, 4.0], device=D)
    draws = torch.multinomial(w, 100_000, replacement=True).cpu()
    freq = torch.bincount(draws, minlength=4).double() / 100_000
    assert (freq - torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.double)).abs().max().item() < 0.01
    picks = torch.multinomial(torch.ones(2, 50, device=D), 50).cpu()  # without replacement: a permutation
    assert all(torch.equal(row.sort().values, torch.arange(50)) for row in picks)


def test_consecutive_draws_are_uncorrelated():
    N.manual_seed(4)
    a = torch.randn(50_000, device=D).cpu().double()
    b = torch.randn(50_000, device=D).cpu().double()  # the next op's numbers
    corr = ((a - a.mean()) * (b - b.mean())).mean() / (a.std() * b.std())
    assert abs(corr.item()) < 6 / math.sqrt(50_000)
    lag1 = ((a[1:] - a.mean()) * (a[:-1] - a.mean())).mean() / a.var()
    assert abs(lag1.item()) < 6 / math.sqrt(50_000)
