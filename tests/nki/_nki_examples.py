"""Loading the kernels of examples/nki/ in tests. The examples install the
torch_neuronx / nki aliases as a user would; the aliases are opt-in per
process, so they are removed again once the example module is loaded (it
keeps its own references)."""
import importlib.util
import os
import sys
from pathlib import Path

from hypothesis import settings

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "nki"
_ALIASED = ("torch_neuronx", "nki", "neuronxcc")


def remove_aliases() -> None:
    for name in [n for n in sys.modules if n.split(".")[0] in _ALIASED]:
        del sys.modules[name]


def load(name: str):
    module_name = f"nki_example_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        remove_aliases()
    return module


def few(n: int):
    """n examples under the default profile (kernels are slow to simulate), the profile's count under deep."""
    def wrap(test):
        if os.environ.get("NEURON_SIM_HYPOTHESIS_PROFILE", "default") == "default":
            return settings(max_examples=n)(test)
        return test
    return wrap
