"""Unsupported features fail loudly, naming the limitation and the way out,
and are counted for the migration report."""
import pytest
import torch
import torch.autograd.forward_ad as fwAD

import torch_neuron_sim
from torch_neuron_sim import _C


@pytest.fixture(autouse=True)
def default_native_ops():
    """These tests rely on the default table; other tests may have changed it."""
    torch_neuron_sim.native_ops.load()


FWD = r"forward-mode AD .* not supported.*reverse-mode.*(torch.autograd.grad|jacrev)"


def hits(feature):
    return dict(_C._unsupported_hits()).get(feature, 0)


def test_forward_ad_dual_tensor():
    before = hits("forward-mode AD")
    with fwAD.dual_level():
        with pytest.raises(NotImplementedError, match=FWD):
            fwAD.make_dual(torch.ones(3, device="neuron"), torch.ones(3, device="neuron"))
    assert hits("forward-mode AD") == before + 1


def test_func_jvp_and_jacfwd():
    x = torch.ones(3, device="neuron")
    with pytest.raises(NotImplementedError, match=FWD):
        torch.func.jvp(torch.sin, (x,), (torch.ones_like(x),))
    with pytest.raises(NotImplementedError, match=FWD):
        torch.func.jacfwd(torch.sin)(x)


def test_forward_ad_on_cpu_and_reverse_mode_on_neuron_still_work():
    x = torch.ones(3)
    _, t = torch.func.jvp(torch.sin, (x,), (torch.ones(3),))
    assert torch.allclose(t, torch.cos(x))
    jac = torch.func.jacrev(torch.sin)(x.to("neuron"))
    assert torch.allclose(jac.cpu(), torch.diag(torch.cos(x)))


def test_sparse_and_quantized_are_counted():
    before_sparse = hits("sparse tensors")
    with pytest.raises(NotImplementedError, match="to_dense"):
        torch.eye(3).to_sparse().to("neuron")
    assert hits("sparse tensors") == before_sparse + 1
    q = torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.qint8)
    with pytest.raises(NotImplementedError, match=r"quantized|dequantize"):
        q.to("neuron")


CSR = r"sparse CSR tensors are not supported \(aten::\w+\).*to_dense\(\)"


def test_a_sparse_csr_tensor_on_neuron_fails_at_its_first_use():
    # PyTorch builds a CSR tensor on the device without dispatching to it (as on
    # TorchNeuron), so .to("neuron") succeeds; every use then names the limitation.
    before = hits("sparse CSR tensors")
    s = torch.eye(3).to_sparse_csr().to("neuron")
    assert s.layout == torch.sparse_csr and s.device.type == "neuron"
    dense = torch.ones(3, 3, device="neuron")
    for use in (lambda: s.to("cpu"), lambda: s.to_dense(), lambda: s.values(), lambda: s.col_indices(),
                lambda: s.crow_indices(), lambda: s.sum(), lambda: s.clone(), lambda: torch.mm(s, dense),
                lambda: torch.sparse.sampled_addmm(s, dense, dense)):
        with pytest.raises(NotImplementedError, match=CSR):
            use()
    assert hits("sparse CSR tensors") > before
    assert dense.sum().item() == 9  # the process stays usable
