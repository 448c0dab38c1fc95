"""Environment variables the emulator reads, given hostile values: each one
is accepted with its documented meaning or refused with an error that names
it; never a crash, a hang, or a value silently wrapped around. The machine's
variables are read by the same C++ code a new process runs
(_C._read_machine_from_env); the Python-read ones by the installer that reads
them at import, run again here, then run once more with the variable unset."""
import contextlib
import math
import os
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torch_neuron_sim import _C

MACHINE_VARS = ["NEURON_SIM_PROFILE", "NEURON_LOGICAL_NC_CONFIG", "NEURON_SIM_CHIPS", "NEURON_SIM_HBM_GB",
                "NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES"]
INTEGER_VARS = {"NEURON_LOGICAL_NC_CONFIG", "NEURON_SIM_CHIPS", "NEURON_RT_NUM_CORES"}

# What an environment variable can hold (no NUL, no lone surrogates), biased
# towards values near what the parsers expect.
TRICKY = ["", " ", "nan", "inf", "-inf", "1e308", "1e30", "-0", "0", "1", "2", "-1", "2147483648", "4294967297",
          "99999999999999999999", "0x10", "1.5", "0-1", "1-0", "0-1-2", "0-2147483647", "-3", "1,,2", "1x", "trn2",
          "trn1", "trn3", " 4", "4 ", "\u0661", "０"]
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=24)
hostile = st.one_of(st.sampled_from(TRICKY), text, st.integers(-2**70, 2**70).map(str),
                    st.lists(st.integers(-5, 300), min_size=1, max_size=4).map(lambda xs: "-".join(map(str, xs))))


@contextlib.contextmanager
def environment(values: dict):
    saved = {k: os.environ.get(k) for k in values}
    try:
        os.environ.update(values)
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@given(st.dictionaries(st.sampled_from(MACHINE_VARS), hostile, min_size=1, max_size=4))
def test_machine_variables_are_read_or_refused_by_name(env):
    with environment(env):
        try:
            m = _C._read_machine_from_env()
        except ValueError as e:
            assert any(name in str(e) for name in env) or "logical NeuronCores" in str(e), (env, str(e))
            return
    assert 0 <= len(m["visible_cores"]) <= 128, (env, m)
    assert m["hbm_per_device"] > 0 and m["lnc"] in (1, 2), (env, m)
    for name in INTEGER_VARS & env.keys():  # an integer accepted is that integer, never wrapped
        ignored = name == "NEURON_RT_NUM_CORES" and env.get("NEURON_RT_VISIBLE_CORES", "").strip()
        if env[name].strip() and not ignored:
            assert int(env[name]) in (m["lnc"], m["chips"], len(m["visible_cores"])), (env, m)


@pytest.mark.parametrize("env,words", [
    ({"NEURON_SIM_CHIPS": "4294967297"}, ["NEURON_SIM_CHIPS='4294967297' is out of range"]),
    ({"NEURON_RT_NUM_CORES": "4294967296"}, ["NEURON_RT_NUM_CORES='4294967296' is out of range"]),
    ({"NEURON_SIM_CHIPS": "2000000000"}, ["more chips than any machine has"]),
    ({"NEURON_RT_VISIBLE_CORES": "0-1-2"}, ["is not a list of core ids"]),
    ({"NEURON_RT_VISIBLE_CORES": "1x"}, ["is not a list of core ids"]),
    ({"NEURON_RT_VISIBLE_CORES": "0-2147483647"}, ["beyond any machine's cores"]),  # was spelled out core by core
    ({"NEURON_RT_VISIBLE_CORES": "3-1"}, ["whose end is below its start"]),
    ({"NEURON_SIM_HBM_GB": "nan"}, ["must be a positive number of GiB"]),
    ({"NEURON_SIM_HBM_GB": "inf"}, ["must be a positive number of GiB"]),
    ({"NEURON_SIM_HBM_GB": "1e30"}, ["must be a positive number of GiB, at most"]),
])
def test_values_that_used_to_wrap_hang_or_overflow_are_refused(env, words):
    with environment(env), pytest.raises(ValueError) as info:
        _C._read_machine_from_env()
    for w in words:
        assert w in str(info.value)


def _installers():
    from torch_neuron_sim import profiler, torch_neuronx
    from torch_neuron_sim.devices import autograd_exit, random
    from torch_neuron_sim.execution import adaptive_eager, compile_cache, dtype_policy, tracking
    from torch_neuron_sim.torch_neuronx import metrics
    return {"NEURON_SIM_COMPILE_MS": compile_cache._install, "NEURON_SIM_ADAPTIVE_EAGER_MAX_OPS": adaptive_eager._install,
            "TORCH_NEURONX_ENABLE_CONCATENATION": adaptive_eager._install, "NEURON_SIM_FALLBACK": tracking._install,
            "NEURON_SIM_DTYPE_POLICY": dtype_policy._install, "TORCH_NEURONX_LOG_LEVEL": torch_neuronx._configure,
            "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS": torch_neuronx._configure,
            "NEURON_SIM_RNG": random._install, "TORCH_NEURONX_METRICS_ENABLED": metrics._install,
            "NEURON_SIM_TIMING": profiler._install, "NEURON_SIM_EXIT_DRAIN_MS": autograd_exit._install}


@given(st.sampled_from(sorted(_installers())), hostile)
def test_python_read_variables_are_read_or_refused_by_name(name, value):
    import torch
    install = _installers()[name]
    try:
        with environment({name: value}), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                install()
            except ValueError as e:
                assert name in str(e), (name, value, str(e))
            for w in caught:
                assert name in str(w.message), (name, value, str(w.message))
            from torch_neuron_sim.execution import compile_cache
            assert math.isfinite(compile_cache.compile_latency_ms())
    finally:
        install()  # the variable unset again: the default back
    x = torch.arange(4.0, device="neuron")
    assert (x * 2).cpu().tolist() == [0.0, 2.0, 4.0, 6.0]


def test_a_compile_latency_of_inf_or_nan_is_refused():
    from torch_neuron_sim.execution import compile_cache
    for value in ("inf", "nan", "-5"):
        with environment({"NEURON_SIM_COMPILE_MS": value}), pytest.raises(ValueError, match="NEURON_SIM_COMPILE_MS"):
            compile_cache._install()
    compile_cache._install()
    assert compile_cache.compile_latency_ms() == 0.0


def test_an_exit_drain_wait_that_is_no_number_of_ms_is_refused():
    from torch_neuron_sim import autograd_exit
    before = autograd_exit.timeout_ms()
    for value in ("inf", "nan", "-1", "1e12", "2s"):
        with environment({"NEURON_SIM_EXIT_DRAIN_MS": value}), pytest.raises(ValueError, match="NEURON_SIM_EXIT_DRAIN_MS"):
            autograd_exit._install()
    autograd_exit._install()
    assert autograd_exit.timeout_ms() == before


def test_a_huge_adaptive_eager_limit_means_no_limit():
    from torch_neuron_sim.execution import adaptive_eager
    with environment({"NEURON_SIM_ADAPTIVE_EAGER_MAX_OPS": "99999999999999999999"}):
        adaptive_eager._install()  # was a TypeError from the binding
        assert adaptive_eager.max_ops() == 2**32 - 1
    adaptive_eager._install()
    adaptive_eager.set_max_ops(1024)
