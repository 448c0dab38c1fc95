"""Complex tensors, conjugate and negative views on `neuron` (lazy bits that
PyTorch's Conjugate/Negative keys resolve) work as on the CPU: no crash, no
recursion, the same values. Complex ops take the CPU fallback."""

import pytest
import torch

import torch_neuron_sim
from conftest import run_python

N = "neuron"


def _c(*shape):
    g = torch.Generator().manual_seed(0)
    return torch.randn(*shape, dtype=torch.complex64, generator=g)


def test_reading_a_conjugate_view():
    x = _c(8)
    y = x.to(N).conj()
    assert y.is_conj()
    torch.testing.assert_close(y.cpu(), x.conj(), rtol=0, atol=0)
    torch.testing.assert_close(y.resolve_conj().cpu(), x.conj().resolve_conj(), rtol=0, atol=0)
    assert y[3].item() == x.conj()[3].item()
    assert "tensor(" in repr(y)


def test_negative_view_of_a_conjugate():
    x = _c(8)
    y = x.to(N).conj().imag  # imag of a conjugate view is a negative view
    assert y.is_neg()
    torch.testing.assert_close(y.cpu(), x.conj().imag, rtol=0, atol=0)
    torch.testing.assert_close(torch._neg_view(x.to(N)).cpu(), -x, rtol=0, atol=0)


@pytest.mark.parametrize("fn", ["ifft", "hfft", "ihfft", "fft", "rfft"])
def test_fft_of_a_real_neuron_tensor(fn):
    x = torch.randn(8, generator=torch.Generator().manual_seed(1))
    f = getattr(torch.fft, fn)
    torch.testing.assert_close(f(x.to(N)).cpu(), f(x))


def test_ops_on_conjugate_views_match_cpu():
    a, b = _c(4, 4), _c(4, 4) * 2
    an, bn = a.to(N), b.to(N)
    for fn in (lambda p, q: p.conj() @ q, lambda p, q: p.conj() + q, lambda p, q: torch.dot(p[0].conj(), q[0]),
               lambda p, q: p.mH @ q, lambda p, q: (p.conj() * q).sum(), lambda p, q: p.conj().clone()):
        torch.testing.assert_close(fn(an, bn).cpu(), fn(a, b))
    # in-place into a conjugate view writes conjugated values
    c, cn = a.clone(), an.clone()
    c.conj().copy_(b)
    cn.conj().copy_(bn)
    torch.testing.assert_close(cn.cpu(), c, rtol=0, atol=0)


def test_complex_ops_fall_back(tracked):
    x = _c(6)
    y = torch.exp(x.to(N))
    torch.testing.assert_close(y.cpu(), torch.exp(x))
    assert any("exp" in op for op in torch_neuron_sim.get_fallback_ops())


def test_conj_backward_matches_cpu():
    x = _c(5).requires_grad_()
    xn = x.detach().to(N).requires_grad_()
    (x.conj() * x).real.sum().backward()
    (xn.conj() * xn).real.sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), x.grad)


def test_user_conj_kernel_that_raises_leaves_the_process_usable():
    # A user's PrivateUse1 kernel for _conj (what Tensor.conj() calls on a
    # complex tensor) replaces the built-in view; when it raises, the error
    # reaches the caller and nothing recurses.
    lib = torch.library.Library("aten", "IMPL")

    def refuse(x):
        raise RuntimeError("my conj refuses")

    lib.impl("_conj", refuse, "PrivateUse1")
    try:
        with pytest.raises(RuntimeError, match="my conj refuses"):
            _c(4).to(N).conj()
    finally:
        lib._destroy()
    x = _c(4)
    torch.testing.assert_close(x.to(N).conj().cpu(), x.conj())


def test_user_conj_kernel_forced_to_the_cpu():
    # A user kernel that computes conj on the CPU and returns a lazy CPU view
    # copied back: the copy resolves the bit.
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("_conj", lambda x: x.cpu().conj().to(x.device), "PrivateUse1")
    try:
        x = _c(4)
        y = x.to(N).conj()
        torch.testing.assert_close(y.cpu(), x.conj())
    finally:
        lib._destroy()


def test_conjugate_view_reads_do_not_crash_a_fresh_process():
    # The original symptom was a segmentation fault that killed the interpreter.
    r = run_python("""
        import torch, torch_neuron_sim
        x = torch.randn(8, dtype=torch.complex64)
        y = x.to("neuron").conj()
        assert torch.equal(y.cpu(), x.conj())
        r = torch.randn(8)
        assert torch.allclose(torch.fft.ifft(r.to("neuron")).cpu(), torch.fft.ifft(r))
        print("ok")
    """)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ok" in r.stdout
