"""`torch_neuronx` (and `nki`) findable the way training stacks look for them:
`importlib.util.find_spec` right after `import torch`, nothing heavy imported
until used, a real installation always winning, an environment variable
switching the alias off, and a real backend that owns `neuron` refused."""
import os
import sys
import textwrap

from conftest import run_python


def test_find_spec_finds_the_emulator_right_after_import_torch_and_imports_nothing():
    r = run_python("""
        import importlib.util, sys
        import torch
        spec = importlib.util.find_spec("torch_neuronx")
        print(spec is not None, spec.origin.endswith("torch_neuron_sim/torch_neuronx/__init__.py"))
        print(importlib.util.find_spec("nki") is not None, importlib.util.find_spec("neuronxcc") is not None)
        # looked up, not imported: the alias names and the NKI simulator stay out of sys.modules
        print(sorted(n for n in ("torch_neuronx", "nki", "neuronxcc", "torch_neuron_sim.nki") if n in sys.modules))
        import torch_neuronx
        print(torch_neuronx is sys.modules["torch_neuron_sim.torch_neuronx"], torch_neuronx.device_count() >= 1)
        import torch_neuronx.metrics, torch_neuronx.memory, torch_neuronx._C
        from torch_neuronx import neuron
        import torch_neuron_sim
        print(torch_neuronx.metrics is torch_neuron_sim.metrics, torch_neuronx.memory is torch_neuron_sim.memory,
              neuron is torch.neuron)
        # a submodule the alias did not register is the emulator's module, not a second copy of its file
        import torch_neuronx.utils as u, torch_neuron_sim.torch_neuronx.utils as v
        print(u is v, importlib.util.find_spec("torch_neuronx.no_such_module"))
        import nki.language as nl, torch_neuron_sim.nki.language as sim_nl
        from neuronxcc import nki
        print(nl is sim_nl, nki is sys.modules["torch_neuron_sim.nki"])
        torch_neuron_sim.install_torch_neuronx_alias()  # already installed: nothing changes
        print(sys.modules["torch_neuronx"] is torch_neuronx)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["True True", "True True", "[]", "True True", "True True True",
                                     "True None", "True True", "True"], r.stdout


def test_the_environment_variable_switches_the_alias_off():
    r = run_python("""
        import importlib.util, sys
        import torch
        print(importlib.util.find_spec("torch_neuronx"), importlib.util.find_spec("nki"))
        try:
            import torch_neuronx
        except ModuleNotFoundError as e:
            print(type(e).__name__, e.name)
        print([n for n in sys.modules if n == "torch_neuronx" or n.startswith("torch_neuronx.")])
        print(torch.ones(2, device="neuron").add(1).cpu().tolist())  # the device itself is unaffected
        import torch_neuron_sim
        torch_neuron_sim.install_torch_neuronx_alias()  # the explicit call still installs it
        import torch_neuronx
        print(torch_neuronx.__name__)
    """, env={"NEURON_SIM_TORCH_NEURONX_ALIAS": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["None None", "ModuleNotFoundError torch_neuronx", "[]", "[2.0, 2.0]",
                                     "torch_neuron_sim.torch_neuronx"], r.stdout


def _fake_real_package(root, registers=False):
    """A stand-in for an installed torch-neuronx: its package and its distribution metadata."""
    pkg = root / "torch_neuronx"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("REAL = True\n")
    info = root / "torch_neuronx-2.14.3.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch-neuronx\nVersion: 2.14.3.0\n")
    return str(root)


def test_a_real_torch_neuronx_always_wins_and_the_emulator_says_so_once(tmp_path):
    path = _fake_real_package(tmp_path)
    r = run_python("""
        import importlib.util
        import torch
        import torch_neuronx
        print(getattr(torch_neuronx, "REAL", False), importlib.util.find_spec("torch_neuronx").origin.startswith(%r))
        import torch_neuron_sim
        torch_neuron_sim.install_torch_neuronx_alias()  # leaves the real package alone
        import sys
        print(sys.modules["torch_neuronx"] is torch_neuronx, torch.ones(1, device="neuron").device)
    """ % path, env={"PYTHONPATH": path + os.pathsep + os.environ.get("PYTHONPATH", "")})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["True True", "True neuron:0"], r.stdout
    # one message naming both packages and which one registered `neuron`
    assert r.stderr.count("torch-neuronx 2.14.3.0 (the real Trainium backend) and torch-neuron-sim") == 1, r.stderr
    assert "registered by torch-neuron-sim (the emulator)" in r.stderr


def test_the_emulator_refuses_a_device_the_real_backend_already_registered(tmp_path):
    path = _fake_real_package(tmp_path)
    r = run_python("""
        import torch
        torch.utils.rename_privateuse1_backend("neuron")  # what the real backend does when it loads first
        try:
            import torch_neuron_sim
        except ImportError as e:
            print(e)
        print(torch.ones(2).add(1).tolist(), "torch_neuron_sim._C" in __import__("sys").modules)
    """, env={"PYTHONPATH": path + os.pathsep + os.environ.get("PYTHONPATH", ""),
              "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()
    assert first.startswith("torch-neuronx 2.14.3.0 (the real Trainium backend) and torch-neuron-sim (the emulator) "
                            "are both installed; the 'neuron' device (PrivateUse1) is registered by torch-neuronx "
                            "2.14.3.0"), first
    assert first.endswith("The emulator did not register."), first
    assert second == "[2.0, 2.0] False"  # the process stays usable; the emulator's kernels never loaded
