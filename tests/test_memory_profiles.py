"""Trainium profiles set how many devices a process sees and how much HBM
each has (facts §11). The device table is read once per process, so each
configuration runs in a fresh interpreter."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

GiB = 2**30


def start_python(code, env):
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc):
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


PROBE = """
import torch, torch_neuron_sim
n = torch.neuron.device_count()
p = torch.neuron.get_device_properties(n - 1)
print(n, p.name, p.total_memory, torch.neuron.mem_get_info(n - 1)[1])
"""


PROFILES = {  # configuration -> (devices, name, HBM per device)
    "default trn2 (trn2.3xlarge, LNC=2)": ({}, 4, "trn2", 24 * GiB),
    "trn2 LNC=1": ({"NEURON_LOGICAL_NC_CONFIG": "1"}, 8, "trn2", 12 * GiB),
    "trn1": ({"NEURON_SIM_PROFILE": "trn1"}, 2, "trn1", 16 * GiB),
    "trn3": ({"NEURON_SIM_PROFILE": "trn3"}, 4, "trn3", 36 * GiB),
    "trn2.48xlarge": ({"NEURON_SIM_CHIPS": "16"}, 64, "trn2", 24 * GiB),
    "trn2.48xlarge LNC=1": ({"NEURON_SIM_CHIPS": "16", "NEURON_LOGICAL_NC_CONFIG": "1"}, 128, "trn2", 12 * GiB),
    "HBM override": ({"NEURON_SIM_HBM_GB": "0.5"}, 4, "trn2", GiB // 2),
    "visible cores": ({"NEURON_SIM_PROFILE": "trn3", "NEURON_RT_VISIBLE_CORES": "1-2"}, 2, "trn3", 36 * GiB),
}
ERRORS = {  # configuration -> words the error must contain
    "129+ devices": ({"NEURON_SIM_CHIPS": "17", "NEURON_LOGICAL_NC_CONFIG": "1"},
                     ["136 logical NeuronCores", "at most 128 devices"]),
    "unknown profile": ({"NEURON_SIM_PROFILE": "trn9"}, ["use trn1, trn2 or trn3"]),
    "LNC on trn1": ({"NEURON_SIM_PROFILE": "trn1", "NEURON_LOGICAL_NC_CONFIG": "2"}, ["not supported on trn1"]),
    "negative HBM": ({"NEURON_SIM_HBM_GB": "-1"}, ["must be a positive number of GiB"]),
}


@pytest.fixture(scope="module")
def results():
    """Every configuration in its own interpreter, all started at once."""
    procs = {k: start_python(PROBE, env) for k, (env, *_rest) in {**PROFILES, **ERRORS}.items()}
    return {k: finish(p) for k, p in procs.items()}


@pytest.mark.parametrize("config", PROFILES)
def test_profile_sets_device_count_and_hbm(results, config):
    _, count, name, hbm = PROFILES[config]
    rc, out, err = results[config]
    assert rc == 0, err
    assert out.split() == [str(count), name, str(hbm), str(hbm)]


@pytest.mark.parametrize("config", ERRORS)
def test_bad_machine_settings_are_clear_errors(results, config):
    _, words = ERRORS[config]
    rc, _, err = results[config]
    assert rc != 0
    for w in words:
        assert w in err


def test_device_properties_as_the_real_backend_reports_them():
    p = torch.neuron.get_device_properties(0)
    assert p.name == "trn2" and p.total_memory == 24 * GiB
    assert repr(p) == f"<NeuronDeviceProperties(name='trn2', total_memory={24 * GiB})>"
    assert torch.neuron.get_device_properties("neuron:1").total_memory == 24 * GiB
    with pytest.raises(ValueError, match="Invalid device id"):
        torch.neuron.get_device_properties(4)
