"""The NKI simulator: kernels written in the Neuron Kernel Interface run on
the CPU, with Trainium's limits checked (docs/nki.md).

    from torch_neuron_sim import nki
    import torch_neuron_sim.nki.language as nl
    import torch_neuron_sim.nki.isa as nisa

or, after torch_neuron_sim.nki.install_nki_alias() (also done by
install_torch_neuronx_alias()), `import nki` / `from neuronxcc import nki`
as kernels for the hardware are written.

Parts: language (nl), isa (nisa), memory (HBM/SBUF/PSUM tensors and their
capacity), limits (per generation), launch (one launch's state), kernel
(@jit, grids), simulate (nki.simulate), harness (neuronxcc.nki's
simulate_kernel, baremetal, benchmark), cost (the device timeline),
torch_wiring (wrap_nki / nki_op)."""
from __future__ import annotations

from . import isa, language, typing  # noqa: F401
from .alias import install_nki_alias  # noqa: F401
from .cost import kernel_costs  # noqa: F401
from .errors import NKIError  # noqa: F401
from .jit import Kernel, jit  # noqa: F401
from .harness import baremetal, benchmark, simulate_kernel  # noqa: F401
from .simulate import simulate  # noqa: F401

__nki_simulator__ = True  # marks this package as the simulator, never a real nki install

from .torch_wiring import wrap_nki  # noqa: F401,E402
