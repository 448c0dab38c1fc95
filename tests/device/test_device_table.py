"""The simulated machine follows the real runtime's environment variables."""
import pytest

from conftest import run_python

COUNT = "import torch, torch_neuron_sim; print(torch.neuron.device_count(), torch.neuron.get_device_properties(0).total_memory)"


@pytest.mark.parametrize("env,count", [
    ({}, 4),
    ({"NEURON_RT_VISIBLE_CORES": "0-1"}, 2),
    ({"NEURON_RT_VISIBLE_CORES": "1,3"}, 2),
    ({"NEURON_RT_NUM_CORES": "3"}, 3),
])
def test_visible_cores(env, count):
    r = run_python(COUNT, env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(count), str(24 * 2**30)]


def test_visible_cores_beyond_machine_is_a_clear_error():
    # a machine of a given size (NEURON_SIM_CHIPS) has only its cores
    r = run_python("import torch, torch_neuron_sim; torch.neuron.device_count()",
                   {"NEURON_RT_VISIBLE_CORES": "0-9", "NEURON_SIM_CHIPS": "1"})
    assert r.returncode != 0
    assert "NEURON_RT_VISIBLE_CORES names core 4" in r.stderr and "logical cores 0 to 3" in r.stderr
    # without it, the instance grows to the largest of the profile (a trn2.48xlarge: 64 cores at LNC=2)
    r = run_python("import torch, torch_neuron_sim; torch.neuron.device_count()",
                   {"NEURON_RT_VISIBLE_CORES": "60-64", "NEURON_SIM_HBM_GB": "1"})
    assert r.returncode != 0
    assert "NEURON_RT_VISIBLE_CORES names core 64, but the largest trn2 instance (trn2.48xlarge" in r.stderr


def test_out_of_range_device_names_valid_range_with_visible_cores():
    r = run_python("""
        import torch, torch_neuron_sim
        try:
            torch.ones(1).to("neuron:2")
        except Exception as e:
            print(type(e).__name__, e)
        print(torch.ones(1).to("neuron:1").device)
    """, {"NEURON_RT_VISIBLE_CORES": "0-1"})
    assert r.returncode == 0, r.stderr
    assert "Valid range is 0 to 1" in r.stdout
    assert "neuron:1" in r.stdout.splitlines()[-1]
