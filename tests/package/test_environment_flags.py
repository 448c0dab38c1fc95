"""One rule for what a true environment switch is (docs/semantics.md, section 6): on for
1, true, yes or on (spaces trimmed, any case), the default when unset or empty, off for
anything else; the extension's own switches (C++) and the package's (Python) read it alike."""
import pytest

from conftest import run_python
from torch_neuron_sim import environment

SPELLINGS = {"1": True, "true": True, " TRUE ": True, "yes": True, "On": True,
             "0": False, "false": False, "off": False, "no": False, "2": False, "enabled": False}


@pytest.mark.parametrize("value", sorted(SPELLINGS))
def test_a_switch_reads_one_way(monkeypatch, value):
    monkeypatch.setenv("NEURON_SIM_TEST_SWITCH", value)
    assert environment.flag("NEURON_SIM_TEST_SWITCH") is SPELLINGS[value]
    assert environment.flag("NEURON_SIM_TEST_SWITCH", True) is SPELLINGS[value]


def test_unset_or_empty_is_the_default(monkeypatch):
    monkeypatch.delenv("NEURON_SIM_TEST_SWITCH", raising=False)
    assert environment.flag("NEURON_SIM_TEST_SWITCH") is False
    assert environment.flag("NEURON_SIM_TEST_SWITCH", True) is True
    monkeypatch.setenv("NEURON_SIM_TEST_SWITCH", "  ")
    assert environment.flag("NEURON_SIM_TEST_SWITCH", True) is True
    assert environment.setting("NEURON_SIM_TEST_SWITCH", "x") == "x"


def test_the_switches_of_both_layers_agree_on_on_and_on_2():
    """`on` turns on a C++ switch (poisoning) and a Python one (the metrics, adaptive eager)
    alike; `2` turns on neither."""
    code = """
        import torch_neuron_sim
        from torch_neuron_sim import _C, adaptive_eager, metrics
        print(_C._debug_modes()["poison"], metrics.is_enabled(), adaptive_eager.enabled())
    """
    for value, expected in (("on", "True True True"), ("2", "False False False")):
        r = run_python(code, env={"NEURON_SIM_POISON": value, "TORCH_NEURONX_METRICS_ENABLED": value,
                                  "TORCH_NEURONX_ENABLE_CONCATENATION": value})
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip().splitlines()[-1] == expected, (value, r.stdout)
