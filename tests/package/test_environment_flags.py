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


# Modules that touch the environment without reading a switch: the test mode
# sets a variable and puts back the value it found.
_NOT_READS = {"testing/streams_mode.py"}


def _environment_reads(tree):
    """Lines of os.environ.get / os.getenv calls and os.environ[...] loads."""
    import ast
    for node in ast.walk(tree):
        target = node.func if isinstance(node, ast.Call) else node.value if isinstance(node, ast.Subscript) else None
        text = ast.unparse(target) if target is not None else ""
        if (isinstance(node, ast.Call) and text in ("os.environ.get", "os.getenv", "environ.get", "getenv")) or \
                (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and text in ("os.environ", "environ")):
            yield node.lineno


def test_every_variable_is_read_through_the_one_reader():
    """Python reads the environment through environment.flag / setting, C++ through
    runtime/environment.h: a straggler would bring back its own rule for true."""
    import ast
    from pathlib import Path
    root = Path(environment.__file__).resolve().parent
    offenders = [f"torch_neuron_sim/{p.relative_to(root)}:{line}"
                 for p in sorted(root.rglob("*.py"))
                 if p.name != "environment.py" and str(p.relative_to(root)) not in _NOT_READS
                 for line in _environment_reads(ast.parse(p.read_text()))]
    csrc = root.parent / "csrc"
    offenders += [f"csrc/{p.relative_to(csrc)}:{n}" for p in sorted(csrc.rglob("*"))
                  if p.suffix in (".h", ".cpp") and p.relative_to(csrc).as_posix() != "runtime/environment.cpp"
                  for n, text in enumerate(p.read_text().splitlines(), 1) if "getenv(" in text]
    assert not offenders, "read the environment through the one reader:\n" + "\n".join(offenders)


def test_the_reader_test_sees_a_straggler():
    import ast
    assert list(_environment_reads(ast.parse("import os\nx = os.environ.get('A')\ny = os.environ['B']\n"
                                             "os.environ['C'] = '1'\n"))) == [2, 3]
