"""Shared test setup: hypothesis profiles and helpers to run code in a fresh
interpreter (the device table is read once per process, so environment
variables like NEURON_RT_VISIBLE_CORES need a new process)."""
import logging
import os
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, settings

import torch
import torch_neuron_sim

# `make test` (and CI) runs a bounded, derandomized profile: the same examples
# every run, so a red CI is always reproducible. `make test-deep` explores with
# many more random examples; what it finds gets fixed, then stays covered.
settings.register_profile("default", max_examples=25, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("NEURON_SIM_HYPOTHESIS_PROFILE", "default"))


def run_python(code: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """Runs `code` in a new interpreter with extra environment variables (the time-out
    guards against a hang; a loaded 2-core machine can take a minute to import torch)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def quiet_fallbacks():
    """Fallback announcements silenced (tests that run many fallback ops on purpose)."""
    log = logging.getLogger("torch_neuron_sim")
    level = log.level
    log.setLevel(logging.ERROR)
    yield
    log.setLevel(level)


@pytest.fixture
def plain_arena():
    """For tests that assert the normal block layout: poisoning and guard
    bytes (which a run may switch on with NEURON_SIM_POISON/GUARD) are off."""
    from torch_neuron_sim import _C

    was = _C._debug_modes()
    for m in ("poison", "guard"):
        _C._set_debug_mode(m, False)
    yield
    for m in ("poison", "guard"):
        _C._set_debug_mode(m, was[m])


@pytest.fixture
def tracked():
    """Clears op tracking before the test; yields the package."""
    torch_neuron_sim.clear_op_tracking()
    yield torch_neuron_sim


@pytest.fixture(scope="session")
def chromium():
    """One headless Chromium for the session (starting it costs seconds)."""
    from playwright.sync_api import sync_playwright

    from browser import chromium_path

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def nrt_streams():
    """Multi-stream mode (NEURON_RT_ENABLE_HOST_CC=1) for the test; the default is
    one stream per device, as on TorchNeuron."""
    from torch_neuron_sim.testing import requires_nrt_streams

    with requires_nrt_streams():
        yield


@pytest.fixture
def device_stream():
    """NEURON_SIM_RNG=all for the test: every random op on neuron, the
    fallback's included, draws from the device's own generator (the model of a
    release where all random ops are native); by default, as in the release,
    only ops that run on the device do."""
    torch_neuron_sim.random.set_rng_source("all")
    yield
    torch_neuron_sim.random.set_rng_source("device")


@pytest.fixture
def cpu_stream():
    """NEURON_SIM_RNG=cpu for the test: every random op on neuron draws from the
    CPU default generator (dropout equals CPU dropout)."""
    torch_neuron_sim.random.set_rng_source("cpu")
    yield
    torch_neuron_sim.random.set_rng_source("device")


@pytest.fixture
def fresh_compile(tmp_path, monkeypatch):
    """torch.compile tests: no Dynamo cache, no graph records or metrics, a NEFF
    cache directory of the test's own, and the release's default for graphs
    that fail to compile (TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION unset)."""
    import torch._dynamo

    from torch_neuron_sim.compile import compiler, graphs

    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff"))
    monkeypatch.delenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", raising=False)
    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    compiler.clear_memory_cache()
    graphs.clear()
    yield
    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    graphs.clear()
