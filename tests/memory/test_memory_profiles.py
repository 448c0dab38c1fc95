"""Trainium profiles set how many devices a process sees and how much HBM
each has (docs/memory.md, "Profiles"). The live device table is read once per process: the
figures are checked in-process on the table the environment would give a new
process, and end to end (torch.neuron in a fresh interpreter) for two cases."""
import pytest
import torch

from torch_neuron_sim import _C
from conftest import run_python

GiB = 2**30
KNOBS = ("NEURON_SIM_PROFILE", "NEURON_LOGICAL_NC_CONFIG", "NEURON_SIM_CHIPS", "NEURON_SIM_HBM_GB",
         "NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES")


@pytest.fixture
def machine(monkeypatch):
    """The device table for a given environment."""
    for k in KNOBS:
        monkeypatch.delenv(k, raising=False)

    def read(**env):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        return _C._read_machine_from_env()
    return read


@pytest.mark.parametrize("env,count,name,hbm", [
    ({}, 4, "trn2", 24 * GiB),                                              # trn2.3xlarge: 1 chip, LNC=2
    ({"NEURON_LOGICAL_NC_CONFIG": "1"}, 8, "trn2", 12 * GiB),               # 8 cores of 12 GiB
    ({"NEURON_SIM_PROFILE": "trn1"}, 2, "trn1", 16 * GiB),                  # 2 cores, 32 GiB per chip
    ({"NEURON_SIM_PROFILE": "trn3"}, 4, "trn3", 36 * GiB),                  # 144 GiB per chip at LNC=2
    ({"NEURON_SIM_PROFILE": "trn3", "NEURON_LOGICAL_NC_CONFIG": "1"}, 8, "trn3", 18 * GiB),
    ({"NEURON_SIM_CHIPS": "16"}, 64, "trn2", 24 * GiB),                     # trn2.48xlarge
    ({"NEURON_SIM_CHIPS": "16", "NEURON_LOGICAL_NC_CONFIG": "1"}, 128, "trn2", 12 * GiB),  # the 8-bit limit
    ({"NEURON_SIM_HBM_GB": "0.5"}, 4, "trn2", GiB // 2),                    # capacity override
    ({"NEURON_SIM_CHIPS": "2", "NEURON_RT_VISIBLE_CORES": "6-7"}, 2, "trn2", 24 * GiB),
    ({"NEURON_RT_NUM_CORES": "3"}, 3, "trn2", 24 * GiB),
])
def test_profile_sets_device_count_and_hbm(machine, env, count, name, hbm):
    m = machine(**env)
    assert (len(m["visible_cores"]), m["profile"], m["hbm_per_device"]) == (count, name, hbm)


@pytest.mark.parametrize("env,words", [
    ({"NEURON_SIM_CHIPS": "17", "NEURON_LOGICAL_NC_CONFIG": "1"}, ["136 logical NeuronCores", "at most 128 devices"]),
    ({"NEURON_SIM_PROFILE": "trn9"}, ["use trn1, trn2 or trn3"]),
    ({"NEURON_SIM_PROFILE": "trn1", "NEURON_LOGICAL_NC_CONFIG": "2"}, ["not supported on trn1"]),
    ({"NEURON_SIM_HBM_GB": "-1"}, ["must be a positive number of GiB"]),
    ({"NEURON_SIM_CHIPS": "0"}, ["at least 1"]),
])
def test_bad_machine_settings_are_clear_errors(machine, env, words):
    with pytest.raises(ValueError) as info:
        machine(**env)
    for w in words:
        assert w in str(info.value)


def test_profile_reaches_torch_neuron_in_a_new_process():
    r = run_python("""
        import torch, torch_neuron_sim
        n = torch.neuron.device_count()
        p = torch.neuron.get_device_properties(n - 1)
        x = torch.empty(2**30, dtype=torch.uint8, device=f"neuron:{n - 1}")
        print(n, p.name, p.total_memory, torch.neuron.mem_get_info(n - 1)[1], x.device)
    """, {"NEURON_SIM_PROFILE": "trn3", "NEURON_SIM_CHIPS": "16"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["64", "trn3", str(36 * GiB), str(36 * GiB), "neuron:63"]


def test_more_than_128_devices_is_refused_at_start_up():
    r = run_python("import torch, torch_neuron_sim; torch.neuron.device_count()",
                   {"NEURON_SIM_CHIPS": "17", "NEURON_LOGICAL_NC_CONFIG": "1"})
    assert r.returncode != 0
    assert "136 logical NeuronCores" in r.stderr and "at most 128 devices" in r.stderr


def test_device_properties_as_the_real_backend_reports_them():
    p = torch.neuron.get_device_properties(0)
    assert p.name == "trn2" and p.total_memory == 24 * GiB
    assert repr(p) == f"<NeuronDeviceProperties(name='trn2', total_memory={24 * GiB})>"
    assert torch.neuron.get_device_properties("neuron:1").total_memory == 24 * GiB
    with pytest.raises(ValueError, match="Invalid device id"):
        torch.neuron.get_device_properties(4)
