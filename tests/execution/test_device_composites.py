"""Composite ops the device registers run as one op (linear, rms_norm, the batch_norm
helpers), keep their autograd chains, and the backward ops with an output mask return
what the device returns; every entry of the native table has a path on neuron."""
import torch
import torch.nn.functional as F

import torch_neuron_sim
from torch_neuron_sim.testing import track_neuron_ops
from torch_neuronx_user import D, torch_neuronx, copy_entry_points_restored, neuronx_alias  # noqa: F401 (fixtures)


def _linear_pair(seed, n_in, n_out, batch):
    """A CPU Linear, the same weights on neuron, and a CPU input batch."""
    torch.manual_seed(seed)
    cpu = torch.nn.Linear(n_in, n_out)
    dev = torch.nn.Linear(n_in, n_out).to(D)
    dev.load_state_dict(cpu.state_dict())
    return cpu, dev, torch.randn(batch, n_in)


def test_linear_runs_as_one_op_and_its_backward_is_linear_backward():
    cpu, dev, x = _linear_pair(0, 8, 4, batch=5)
    with track_neuron_ops() as ops:
        out = dev(x.to(D))
        out.square().sum().backward()
    cpu(x).square().sum().backward()
    assert "aten::linear" in ops.executed and "aten::linear_backward" in ops.executed
    assert not any(n.startswith(("aten::addmm", "aten::mm")) for n in ops.executed)
    torch.testing.assert_close(dev.weight.grad.cpu(), cpu.weight.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(dev.bias.grad.cpu(), cpu.bias.grad, rtol=1e-5, atol=1e-5)
    xg = x.to(D).requires_grad_()
    dev(xg).sum().backward()  # grad of the input: the first output of linear_backward
    torch.testing.assert_close(xg.grad.cpu(), cpu.weight.sum(0).expand(5, 8).detach(), rtol=1e-5, atol=1e-5)


def test_composites_without_a_formula_have_no_grad_fn():
    x = torch.tensor([1.0, float("inf"), float("nan")], device=D, requires_grad=True)
    with track_neuron_ops() as ops:
        f = torch.isfinite(x)
        h = F.one_hot(torch.tensor([0, 2], device=D), 3)
    assert f.grad_fn is None and f.cpu().tolist() == [True, False, False]
    assert h.cpu().tolist() == [[1, 0, 0], [0, 0, 1]]
    assert {"aten::isfinite", "aten::one_hot"} <= set(ops.executed)


def test_rms_norm_runs_fused_forward_and_backward_on_neuron():
    torch.manual_seed(1)
    x = torch.randn(3, 5, 8)
    w = torch.randn(8)
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    xd, wd = x.to(D).requires_grad_(), w.to(D).requires_grad_()
    with track_neuron_ops() as ops:
        F.rms_norm(xd, (8,), wd, 1e-6).square().sum().backward()
    F.rms_norm(xc, (8,), wc, 1e-6).square().sum().backward()
    assert {"aten::_fused_rms_norm", "aten::_fused_rms_norm_backward"} <= set(ops.executed)
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(wd.grad.cpu(), wc.grad, rtol=1e-4, atol=1e-4)


def test_batch_norm_helpers_without_cpu_kernels_compute_on_neuron():
    # The SyncBatchNorm building blocks (CUDA-only upstream) against batch normalization on CPU.
    torch.manual_seed(2)
    x = torch.randn(6, 3, 4, dtype=torch.float64)
    w, b = torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    dy = torch.randn(6, 3, 4, dtype=torch.float64)
    xf, wf, bf, dyf = (t.float() for t in (x, w, b, dy))
    xr = x.clone().requires_grad_()
    wr, br = w.clone().requires_grad_(), b.clone().requires_grad_()
    ref = F.batch_norm(xr, None, None, wr, br, training=True, eps=1e-5)
    ref.backward(dy)
    with track_neuron_ops() as ops:
        xd = xf.to(D)
        mean, invstd = torch.batch_norm_stats(xd, 1e-5)
        # Two "ranks" with the same statistics combine to the same statistics.
        rm, rv = torch.zeros(3, device=D), torch.ones(3, device=D)
        counts = torch.tensor([24.0, 24.0], device=D)
        gmean, ginvstd = torch.batch_norm_gather_stats_with_counts(
            xd, torch.stack([mean, mean]), torch.stack([invstd, invstd]), rm, rv, 0.1, 1e-5, counts)
        y = torch.batch_norm_elemt(xd, wf.to(D), bf.to(D), gmean, ginvstd, 1e-5)
        sum_dy, sum_dy_xmu, gw, gb = torch.batch_norm_backward_reduce(
            dyf.to(D), xd, gmean, ginvstd, wf.to(D), True, True, True)
        gx = torch.batch_norm_backward_elemt(dyf.to(D), xd, gmean, ginvstd, wf.to(D), sum_dy, sum_dy_xmu,
                                             torch.tensor([18, 6], device=D, dtype=torch.int32))
    names = {"aten::batch_norm_stats", "aten::batch_norm_gather_stats_with_counts", "aten::batch_norm_elemt",
             "aten::batch_norm_backward_reduce", "aten::batch_norm_backward_elemt"}
    assert names <= set(ops.executed) and ops.fallback == []
    tol = dict(rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(y.cpu().double(), ref.detach(), **tol)
    torch.testing.assert_close(gx.cpu().double(), xr.grad, **tol)
    torch.testing.assert_close(gw.cpu().double(), wr.grad, **tol)
    torch.testing.assert_close(gb.cpu().double(), br.grad, **tol)
    torch.testing.assert_close(rm.cpu().double(), 0.1 * x.mean((0, 2)), **tol)
    # The running variance is unbiased over every rank's samples: 2 x 24 here.
    torch.testing.assert_close(rv.cpu().double(), 0.9 + 0.1 * x.var((0, 2), unbiased=False) * 48 / 47, **tol)


def test_ops_without_cpu_kernels_run_on_the_host_when_the_table_leaves_them_out():
    # A table without linear (a future release, or testing.execution_path("fallback")):
    # linear_backward, which PyTorch has no CPU kernel for, falls back to the emulator's kernel.
    from torch_neuron_sim.testing import execution_path

    cpu, dev, x = _linear_pair(6, 4, 3, batch=2)
    with execution_path("fallback"):
        with track_neuron_ops() as ops:
            dev(x.to(D)).sum().backward()
        assert {"aten::linear", "aten::linear_backward"} <= set(ops.fallback)
        assert not any(n.startswith("aten::linear") for n in ops.executed)
    cpu(x).sum().backward()
    torch.testing.assert_close(dev.weight.grad.cpu(), cpu.weight.grad)
    torch.testing.assert_close(dev.bias.grad.cpu(), cpu.bias.grad)


def test_every_native_table_entry_has_a_path_on_neuron():
    # Each op of the native table either has a CPU kernel to run on arena memory,
    # a composite kernel, or an emulator kernel: none can fail with
    # "Could not run ... with arguments from the 'CPU' backend".
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    host = set(torch_neuron_sim.native_ops.emulated_kernels())
    missing = []
    for name in torch_neuron_sim.native_ops.current():
        base, _, overload = name.partition(".")
        torch._C._dispatch_find_schema_or_throw(base, overload)  # the name exists in this PyTorch
        runs = any(has(name, k) for k in ("CPU", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
                                          "CompositeExplicitAutogradNonFunctional", "PrivateUse1"))
        if not runs and name not in host:
            missing.append(name)
    assert missing == []
    for name in host:  # and every emulator kernel belongs to a native op
        assert name in torch_neuron_sim.native_ops.current()


def test_registered_composites_keep_autograd_chains():
    # The device's own check: an op registered on neuron that PyTorch would
    # decompose (CompositeImplicitAutograd) and that has no derivative formula
    # bypasses autograd, unless it is one the device vouches for.
    from torch_neuronx.utils import get_neuron_registered_ops

    def aten(key):
        return {r[6:] for r in torch._C._dispatch_get_registrations_for_dispatch_key(key) if r.startswith("aten::")}

    safe = {"set_", "set_.source_Tensor_storage_offset", "argsort.stable", "_has_compatible_shallow_copy_type",
            "argsort", "contiguous", "isfinite", "one_hot", "rms_norm"}
    composite, formulas = aten("CompositeImplicitAutograd"), aten("Autograd")
    bad = [op for op in get_neuron_registered_ops(as_sorted=True, keep_variant=True)
           if op in composite and op not in formulas and op not in safe and not op.endswith("_backward")]
    assert bad == []


def test_native_multi_head_attention_basic_call_and_its_warning():
    import warnings

    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    q = torch.randn(2, 4, 8)
    args = (8, 2, mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias)
    dev = [a.to(D) if isinstance(a, torch.Tensor) else a for a in args]
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out, w = torch._native_multi_head_attention(q.to(D), q.to(D), q.to(D), *dev, need_weights=False)
        ref, _ = torch._native_multi_head_attention(q, q, q, *args, need_weights=False)
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    assert w.numel() == 0
    assert any("Sequence length 4 is not a multiple of 512" in str(c.message) and c.category is UserWarning
               for c in caught)


def _same_outputs(got, ref, what):
    assert len(got) == len(ref), what
    for i, (g, r) in enumerate(zip(got, ref)):
        assert (g is None) == (r is None), (what, i, g, r)
        if r is not None:
            torch.testing.assert_close(g.cpu(), r, rtol=1e-4, atol=1e-5, msg=f"{what} output {i}")


def test_backward_ops_with_an_output_mask_return_what_the_device_returns():
    import itertools

    torch.manual_seed(0)
    masks = [list(m) for m in itertools.product([False, True], repeat=3)]
    # convolution_backward (1-D, 2-D, 3-D, transposed): None wherever the mask says no - where
    # the CPU's kernel for 1-D computes the weight gradient with the bias gradient anyway - and
    # the CPU's values where it says yes.
    for dims in (1, 2, 3):
        for transposed in (False, True):
            x, w = torch.randn(2, 3, *[5] * dims), torch.randn(3, 3, *[3] * dims)
            gy = torch.randn(2, 3, *[7 if transposed else 3] * dims)
            conv = ([3], [1] * dims, [0] * dims, [1] * dims, transposed, [0] * dims, 1)
            full = torch.ops.aten.convolution_backward(gy, x, w, *conv, [True, True, True])
            for m in masks:
                got = torch.ops.aten.convolution_backward(gy.to(D), x.to(D), w.to(D), *conv, m)
                _same_outputs(got, [r if keep else None for r, keep in zip(full, m)],
                              f"convolution_backward {dims}-D transposed={transposed} {m}")
    xc, wc = torch.randn(2, 3, 5), torch.randn(3, 3, 3)
    gc = torch.randn(2, 3, 3)
    conv1d = ([3], [1], [0], [1], False, [0], 1)
    assert torch.ops.aten.convolution_backward(gc, xc, wc, *conv1d, [True, False, True])[1] is not None  # the CPU
    on_device = [t.to(D) for t in (gc, xc, wc)]
    with track_neuron_ops() as ops:
        got = torch.ops.aten.convolution_backward(*on_device, *conv1d, [True, False, True])
    assert got[1] is None and ops.executed == ["aten::convolution_backward"] and ops.fallback == []
    # The normalisation backwards: as the CPU, mask by mask.
    xb, wb, bb, gb = torch.randn(4, 6, 5), torch.randn(6), torch.randn(6), torch.randn(4, 6, 5)
    _, mean_g, rstd_g = torch.ops.aten.native_group_norm(xb, wb, bb, 4, 6, 5, 2, 1e-5)
    rm, rv = torch.zeros(6), torch.ones(6)
    _, save_mean, save_invstd = torch.ops.aten.native_batch_norm(xb, wb, bb, rm, rv, True, 0.1, 1e-5)
    for m in masks:
        ref = torch.ops.aten.native_group_norm_backward(gb, xb, mean_g, rstd_g, wb, 4, 6, 5, 2, m)
        got = torch.ops.aten.native_group_norm_backward(*(t.to(D) for t in (gb, xb, mean_g, rstd_g, wb)),
                                                        4, 6, 5, 2, m)
        _same_outputs(got, ref, f"native_group_norm_backward {m}")
        ref = torch.ops.aten.native_batch_norm_backward(gb, xb, wb, rm, rv, save_mean, save_invstd, True, 1e-5, m)
        got = torch.ops.aten.native_batch_norm_backward(*(t.to(D) for t in (gb, xb, wb, rm, rv, save_mean,
                                                                            save_invstd)), True, 1e-5, m)
        _same_outputs(got, ref, f"native_batch_norm_backward {m}")
    h, lw, lb = torch.randn(3, 5, 8), torch.randn(8), torch.randn(8)
    _, mean, rstd = torch.native_layer_norm(h, [8], lw, lb, 1e-5)
    gh = torch.randn(3, 5, 8)
    for m in masks:
        ref = torch.ops.aten.native_layer_norm_backward(gh, h, [8], mean, rstd, lw, lb, m)
        got = torch.ops.aten.native_layer_norm_backward(*(t.to(D) for t in (gh, h)), [8],
                                                        *(t.to(D) for t in (mean, rstd, lw, lb)), m)
        _same_outputs(got, ref, f"native_layer_norm_backward {m}")
    # No CPU kernel: the device's own rules. linear_backward: nothing for the input unless
    # asked, weight and bias together if either is.
    xl, wl, gl = torch.randn(5, 4), torch.randn(3, 4), torch.randn(5, 3)
    full = (gl @ wl, gl.t() @ xl, gl.sum(0))
    for m in masks:
        got = torch.ops.aten.linear_backward(xl.to(D), gl.to(D), wl.to(D), m)
        expected = (full[0] if m[0] else None, *(full[1:] if m[1] or m[2] else (None, None)))
        _same_outputs(got, expected, f"linear_backward {m}")
    # batch_norm_backward_reduce: all four results whatever the flags say.
    xb, gb = torch.randn(4, 3, 5), torch.randn(4, 3, 5)
    mean_b, invstd = xb.mean((0, 2)), (xb.var((0, 2), unbiased=False) + 1e-5).rsqrt()
    args = [t.to(D) for t in (gb, xb, mean_b, invstd, torch.ones(3))]
    every = torch.batch_norm_backward_reduce(*args, True, True, True)
    for m in masks:
        got = torch.batch_norm_backward_reduce(*args, *m)
        assert all(t is not None for t in got), m
        for g, e in zip(got, every):
            torch.testing.assert_close(g.cpu(), e.cpu())
    torch.testing.assert_close(every[0].cpu(), gb.sum((0, 2)))
    torch.testing.assert_close(every[2].cpu(), (gb * (xb - mean_b[:, None]) * invstd[:, None]).sum((0, 2)),
                               rtol=1e-4, atol=1e-5)
