"""Where TorchNeuron and the CPU differ, the emulator behaves as TorchNeuron.
Written as a torch_neuronx user writes tests: through the alias, with the
device's own names, messages and test helpers. One section per behaviour:
op-tracking names, composite ops as one op, random numbers, mixed-device
inputs, streams, `.data =`, devices and messages, torch_neuronx internals."""
import re
import sys
import threading

import pytest
import torch
import torch.nn.functional as F

import torch_neuron_sim
from torch_neuron_sim.testing import (
    assert_op_falls_back_on_cpu, assert_op_runs_on_neuron, check_op_runs_on_neuron, requires_nrt_streams,
    track_neuron_ops,
)

torch_neuron_sim.install_torch_neuronx_alias()
import torch_neuronx  # noqa: E402  (the emulator, through the alias)


def _remove_alias():
    for name in [n for n in sys.modules if n == "torch_neuronx" or n.startswith("torch_neuronx.")]:
        del sys.modules[name]


# The alias is opt-in per process: it stays installed only while this module's
# tests run, so tests collected after this file see a process without it.
_remove_alias()


@pytest.fixture(scope="module", autouse=True)
def _alias():
    torch_neuron_sim.install_torch_neuronx_alias()
    yield
    _remove_alias()

D = "neuron"
_COPY_ENTRIES = ("_nrt_copy_cpu_to_neuron_tensor", "_nrt_copy_neuron_to_cpu_tensor")


@pytest.fixture(autouse=True)
def _copy_entry_points_restored():
    # A test that replaces torch_neuronx._C's copy entry points must leave them as it found
    # them: while one is replaced, every host<->device copy of later tests goes through Python.
    yield
    left = [n for n in _COPY_ENTRIES if n in vars(torch_neuron_sim.torch_neuronx._C)]
    assert not left, f"{left} left replaced on torch_neuronx._C"


# ---- 1. op-tracking names -------------------------------------------------------------------
def test_executed_ops_are_recorded_under_the_overload_that_ran():
    x = torch.randn(4, 3, device=D)
    y = torch.randn(4, 3, device=D)
    torch_neuronx.clear_op_tracking()
    torch.where(x > 0, x, y)
    x + y
    x.sum(0)
    torch.relu(x)
    x / y
    F.softmax(x, dim=1)
    x.masked_fill(x > 0, 0.0)
    ran = set(torch_neuronx.get_executed_ops())
    assert {"aten::gt.Scalar_out", "aten::where.self", "aten::add.Tensor", "aten::sum.dim_IntList", "aten::relu",
            "aten::div.out", "aten::_softmax", "aten::masked_fill_.Scalar"} <= ran
    assert not any(n.endswith(".default") for n in ran)
    assert "aten::div.Tensor" not in ran and "aten::softmax.int" not in ran
    assert torch_neuronx.get_fallback_ops() == []


def test_cxx_kernels_record_fixed_base_names_and_views_stay_untracked():
    torch_neuronx.clear_op_tracking()
    x = torch.empty(4, device=D).fill_(1.0)
    x.new_empty(2)
    x.clone()
    x.sum().item()
    x.view(2, 2)
    x.view(2, 2).t()
    torch.argsort(x, stable=True)
    z = torch.empty(0, device=D)
    z.set_(x)
    z.resize_(2)
    ran = set(torch_neuronx.get_executed_ops())
    assert {"aten::empty", "aten::new_empty", "aten::clone", "aten::_local_scalar_dense", "aten::set_",
            "aten::resize_"} <= ran
    assert not any(n.startswith(("aten::view", "aten::argsort", "aten::t", "aten::unsqueeze")) for n in ran)
    assert torch_neuronx.get_fallback_ops() == []


def test_fallbacks_are_recorded_with_their_overload():
    x = torch.randn(4, 3, device=D)
    torch_neuronx.clear_op_tracking()
    torch.kthvalue(x, 2, 0)
    x.std(0)
    assert {"aten::kthvalue.values", "aten::std.correction"} <= set(torch_neuronx.get_fallback_ops())


def test_helpers_match_names_as_the_device_helpers_do():
    x = torch.randn(4, device=D)
    with track_neuron_ops():
        x / x
        torch.kthvalue(x, 2, 0)
    assert_op_runs_on_neuron("aten::div.out")  # exact
    assert_op_runs_on_neuron("aten::div")  # the base name is contained in "aten::div.out"
    assert_op_falls_back_on_cpu("aten::kthvalue.values")
    assert not check_op_runs_on_neuron("aten::kthvalue.values")  # an exact fallback entry fails
    with pytest.raises(AssertionError, match="to fall back"):
        assert_op_falls_back_on_cpu("aten::kthvalue")  # falling back needs the exact recorded name


def test_tracking_rules_are_data_rendered_in_the_docs():
    from pathlib import Path

    from torch_neuron_sim.execution.native_ops import render_rules

    page = Path(__file__).resolve().parents[1] / "docs" / "op-tracking.md"
    assert page.read_text() == render_rules.render()
    rules = torch_neuron_sim.native_ops.read_rules()
    assert ("record", "aten::div.Tensor", "aten::div.out") in [r[:3] for r in rules]


# ---- 2. composite ops the device registers run as one op -------------------------------------
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


# ---- 3. random numbers: device ops from the device's generator, the fallback's from the CPU's ----
def _offset(device=0):
    return int.from_bytes(bytes(torch.neuron.get_rng_state(device)[8:].tolist()), "little")


def test_random_tensors_on_neuron_are_drawn_from_the_cpu_stream():
    # randn, rand, randint are not native: the fallback runs them on the CPU,
    # drawing from the CPU generator, as the release's fallback does.
    torch.manual_seed(0)
    a, b = torch.randn(4, device=D), torch.rand(3, 2, device=D)
    c = torch.randint(0, 100, (5,), device=D)
    after = torch.randn(2)
    torch.manual_seed(0)
    assert torch.equal(a.cpu(), torch.randn(4)) and torch.equal(b.cpu(), torch.rand(3, 2))
    assert torch.equal(c.cpu(), torch.randint(0, 100, (5,)))
    assert torch.equal(torch.randn(2), after)  # the device draws consumed the CPU stream
    before = torch.neuron.get_rng_state()
    torch.randn(8, device=D)
    assert torch.equal(torch.neuron.get_rng_state(), before)  # a fallback op leaves the device generator alone


def test_dropout_draws_from_the_device_generator():
    x = torch.ones(10, 10, device=D)
    torch.neuron.manual_seed(3)
    torch.default_generator.manual_seed(1)
    out, mask = torch.native_dropout(x, 0.4, True)
    assert _offset() == 100  # one number per element, in whole Philox blocks of 4
    f = F.dropout(torch.ones(3, 3, device=D), 0.4, training=True)
    assert _offset() == 100 + 12
    cpu_state = torch.default_generator.get_state()
    torch.neuron.manual_seed(3)
    torch.default_generator.manual_seed(2)  # another CPU stream changes nothing on the device
    out2, mask2 = torch.native_dropout(x, 0.4, True)
    assert torch.equal(out2.cpu(), out.cpu()) and torch.equal(mask2.cpu(), mask.cpu())
    assert torch.equal(F.dropout(torch.ones(3, 3, device=D), 0.4, training=True).cpu(), f.cpu())
    torch.default_generator.manual_seed(1)
    assert torch.equal(torch.default_generator.get_state(), cpu_state)  # dropout did not consume the CPU stream
    torch.manual_seed(3)
    cpu_out, cpu_mask = torch.native_dropout(x.cpu(), 0.4, True)
    assert not torch.equal(cpu_mask, mask.cpu())  # not the CPU's mask: another stream


def test_dropout_masks_resume_from_a_saved_state_and_per_device():
    x = torch.ones(64, device=D)
    torch.neuron.manual_seed(8)
    F.dropout(x, 0.5)
    saved = torch.neuron.get_rng_state()
    masks = [F.dropout(x, 0.5).cpu() for _ in range(3)]
    torch.neuron.set_rng_state(saved)
    assert all(torch.equal(F.dropout(x, 0.5).cpu(), m) for m in masks)
    torch.neuron.set_rng_state(saved)
    with torch.random.fork_rng(devices=[0], device_type="neuron"):
        F.dropout(x, 0.5)
    assert torch.equal(F.dropout(x, 0.5).cpu(), masks[0])
    # each device has its own generator: dropout on neuron:1 leaves neuron:0's offset alone
    torch.neuron.manual_seed_all(8)
    F.dropout(torch.ones(64, device="neuron:1"), 0.5)
    assert _offset(0) == 0 and _offset(1) == 64


def test_dropout_masks_equal_cpu_native_dropout(cpu_stream):
    x = torch.randn(10, 10)
    torch.manual_seed(3)
    out_d, mask_d = torch.native_dropout(x.to(D), 0.4, True)
    f_d = F.dropout(x.to(D), 0.4, training=True)
    m_d = torch.nn.Dropout(0.4)(x.to(D))
    torch.manual_seed(3)
    out_c, mask_c = torch.native_dropout(x, 0.4, True)
    f_c, m_c = torch.native_dropout(x, 0.4, True)[0], torch.native_dropout(x, 0.4, True)[0]
    assert torch.equal(mask_d.cpu(), mask_c) and torch.equal(out_d.cpu(), out_c)
    assert torch.equal(f_d.cpu(), f_c) and torch.equal(m_d.cpu(), m_c)


def test_sdpa_dropout_draws_from_the_device_generator():
    q = torch.randn(1, 2, 8, 4, device=D)
    torch.neuron.manual_seed(5)
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert _offset() == 1 * 2 * 8 * 8  # one number per attention weight
    torch.neuron.manual_seed(5)
    torch.default_generator.manual_seed(77)
    b = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert torch.equal(a.cpu(), b.cpu())
    state = torch.default_generator.get_state()
    c = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert torch.equal(torch.default_generator.get_state(), state)  # the CPU stream was not consumed
    assert not torch.equal(c.cpu(), a.cpu())  # the device stream moved on


def test_sdpa_dropout_draws_from_the_cpu_stream(cpu_stream):
    q = torch.randn(1, 2, 8, 4, device=D)
    torch.manual_seed(5)
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    after = torch.randn(3)
    torch.manual_seed(5)
    b = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert torch.equal(a.cpu(), b.cpu())
    assert torch.equal(torch.randn(3), after)


def test_rng_source_from_the_environment(monkeypatch):
    from torch_neuron_sim.device import random as rng

    assert rng.rng_source() == "device"  # the default, as the release
    try:
        monkeypatch.setenv("NEURON_SIM_RNG", "cpu")
        rng._install()
        assert rng.rng_source() == "cpu"
        x = torch.randn(50)
        torch.manual_seed(3)
        mask = torch.native_dropout(x.to(D), 0.5, True)[1]
        torch.manual_seed(3)
        assert torch.equal(mask.cpu(), torch.native_dropout(x, 0.5, True)[1])
        monkeypatch.setenv("NEURON_SIM_RNG", "gpu")
        with pytest.raises(ValueError, match="NEURON_SIM_RNG='gpu': use 'device'"):
            rng._install()
        assert rng.rng_source() == "cpu"  # a bad value changes nothing
    finally:
        rng.set_rng_source("device")


def test_generators_as_on_the_device():
    g = torch.Generator(device=D)  # the generator API stays
    g.manual_seed(4)
    assert g.get_state().numel() == 16
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator but found 'neuron'"):
        torch.rand(3, device=D, generator=g)  # the CPU fallback checks its generator
    cpu_gen = torch.Generator().manual_seed(9)
    r = torch.rand(3, device=D, generator=cpu_gen)
    assert torch.equal(r.cpu(), torch.rand(3, generator=torch.Generator().manual_seed(9)))


# ---- 4. mixed-device inputs -----------------------------------------------------------------
def test_mixed_device_inputs_raise_the_device_message():
    a = torch.ones(3, device=D)
    c = torch.ones(3)
    with pytest.raises(RuntimeError, match="^Non-scalar tensor arg1 is on cpu device, expected neuron"):
        a + c
    with pytest.raises(RuntimeError, match=r"Non-scalar tensor arg0\[2\] is on cpu device, expected neuron"):
        torch.cat((a, a, c))
    with pytest.raises(RuntimeError, match="Non-scalar tensor kwarg 'out' is on cpudevice, expected neuron"):
        torch.mul(a, a, out=torch.empty(3))
    with pytest.raises(RuntimeError, match="Non-scalar tensor arg2 is on cpu device, expected neuron"):
        torch.index_select(a, 0, torch.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but found at least two "
                                           "devices, neuron:0 and cpu!"):
        torch.eq(a, c)
    # Allowed: 0-dim CPU tensors, Python scalars, CPU indices for x[idx].
    assert (a + torch.tensor(2.0)).cpu().tolist() == [3.0] * 3
    assert (a * 3).cpu().tolist() == [3.0] * 3
    assert a[torch.tensor([0, 2])].cpu().tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="Inconsistent device IDs found in kernel inputs: expected device 0 but "
                                           "found device 1"):
        a + torch.ones(3, device="neuron:1")
    assert (a + a).cpu().tolist() == [2.0] * 3  # the process stays usable


# ---- 5. streams -------------------------------------------------------------------------------
def test_single_stream_mode_unless_host_cc():
    s = torch.neuron.Stream()
    assert s == torch_neuronx.default_stream() and hash(s) == hash(torch_neuronx.default_stream())
    assert torch.neuron.Stream(priority=-1) == torch_neuronx.default_stream()
    with requires_nrt_streams():
        t = torch.neuron.Stream()
        assert t != torch_neuronx.default_stream() and t.stream_id != 0
    assert torch.neuron.Stream() == torch_neuronx.default_stream()


# ---- 6. .data = across CPU and neuron ---------------------------------------------------------
def test_data_assignment_across_cpu_and_neuron():
    x = torch.zeros(3)
    torch_neuronx.clear_op_tracking()
    x.data = torch.ones(3, device=D)
    assert x.device.type == "neuron" and x.cpu().tolist() == [1.0] * 3
    assert "aten::_has_compatible_shallow_copy_type" in torch_neuronx.get_executed_ops()
    p = torch.nn.Parameter(torch.ones(3, device=D))
    p.data = torch.zeros(3)  # FSDP's CPU offload
    assert p.device.type == "cpu"
    keys = str(torch._C._dispatch_keys(p))
    assert "PrivateUse1" not in keys and "CPU" in keys and "AutogradCPU" in keys
    p.data.add_(1)  # in-place ops now run on the CPU
    assert p.tolist() == [1.0] * 3


# ---- 7. devices, leniencies and messages ------------------------------------------------------
def test_a_new_thread_sees_the_process_default_device():
    seen = []
    torch_neuronx.set_device(2)
    try:
        t = threading.Thread(target=lambda: seen.append(torch_neuronx.current_device()))
        t.start()
        t.join()
        with torch.neuron.device(1):  # a context manager changes this thread only
            t = threading.Thread(target=lambda: seen.append(torch_neuronx.current_device()))
            t.start()
            t.join()
    finally:
        torch_neuronx.set_device(0)
    assert seen == [2, 2]


def test_device_index_errors_are_the_devices():
    n = torch_neuronx.device_count()
    with pytest.raises(RuntimeError, match=rf"^Device index 20 is out of range. Valid range is 0 to {n - 1} for this "
                                           r"process$"):
        torch.ones(2).to("neuron:20")
    with pytest.raises(ValueError, match=f"Invalid device id: 20. Valid range is 0 to {n - 1}"):
        torch_neuronx.set_device(20)
    with pytest.raises(ValueError, match=f"Invalid device id: 20. Valid range is 0 to {n - 1}"):
        torch.neuron.device(20).__enter__()


def test_128_devices_allowed_129_refused():
    from conftest import run_python

    code = """
        import torch, torch_neuron_sim
        print(torch.neuron.device_count(), torch.ones(2, device="neuron:127").device)
    """
    env = {"NEURON_SIM_CHIPS": "17", "NEURON_LOGICAL_NC_CONFIG": "1", "NEURON_SIM_HBM_GB": "1"}
    ok = run_python(code, env={**env, "NEURON_RT_NUM_CORES": "128"})
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.split() == ["128", "neuron:127"]
    refused = run_python(code, env={**env, "NEURON_RT_NUM_CORES": "129"})
    assert refused.returncode != 0 and "at most 128 devices" in refused.stderr


def test_dtype_leniencies_of_the_device():
    x = torch.randn(2, 5, dtype=torch.float16)
    y = torch._softmax(x.to(D), 1, True)  # the CPU refuses half_to_float
    assert y.dtype == torch.float32
    torch.testing.assert_close(y.cpu(), torch.softmax(x.float(), 1), rtol=1e-3, atol=1e-3)
    assert torch._log_softmax(x.to(D), 1, True).dtype == torch.float32


def test_errors_with_the_devices_types_and_messages():
    a = torch.randn(4, 3, device=D)
    with pytest.raises(TypeError, match=r"index_select\(\): Expected dtype int32 or int64 for index"):
        torch.index_select(a, 0, torch.tensor([0.0, 1.0], device=D))
    with pytest.raises(IndexError, match=r"index_select\(\): Index is supposed to be a vector"):
        torch.index_select(a, 0, torch.zeros(2, 2, dtype=torch.long, device=D))
    with pytest.raises(RuntimeError, match="one_hot is only applicable to index tensor of dtype int64, got "
                                           "torch.int32"):
        F.one_hot(torch.tensor([0, 1], dtype=torch.int32, device=D), 3)
    with pytest.raises(TypeError, match="Expected the dtype for input and out to match, but got torch.int32 for "
                                        "input's dtype and torch.float32 for out's dtype."):
        torch.amax(torch.ones(3, dtype=torch.int32, device=D), 0, out=torch.empty((), device=D))
    with pytest.raises(RuntimeError, match="nonzero: Expected out tensor to have scalar type Long but got scalar "
                                           "typeFloat"):
        torch.nonzero(a, out=torch.empty(0, device=D))
    with pytest.raises(RuntimeError, match="torch.histogram: input tensor and hist tensor should have the same "
                                           "dtype, but got input torch.float32 and hist torch.int32"):
        torch.histc(a, 4, out=torch.empty(4, dtype=torch.int32, device=D))
    with pytest.raises(RuntimeError, match="set_: expected neuron source tensor, but got tensor on device cpu"):
        torch.empty(0, device=D).set_(torch.ones(3))
    cl = torch.empty(1, 2, 3, 3, device=D, memory_format=torch.channels_last)  # allocation works
    assert cl.is_contiguous(memory_format=torch.channels_last)
    assert cl.clone().is_contiguous()  # a clone without a format is contiguous (channels-last: section 9)
    with pytest.raises(RuntimeError, match="_copy_from_and_resize now only support copy with same size"):
        torch.cumprod(a, 0, out=torch.empty(2, device=D))  # the fallback does not resize a wrong out=
    assert torch.cumprod(a, 0, out=torch.empty(0, device=D)).shape == (4, 3)  # an empty one it does


def test_multi_head_attention_refuses_what_the_device_refuses():
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).to(D).eval()
    q = torch.randn(2, 4, 8, device=D)
    args = (q, q, q, 8, 2, mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias)
    with torch.no_grad():
        out, w = torch._native_multi_head_attention(*args, need_weights=False)
        assert out.shape == (2, 4, 8)
        with pytest.raises(NotImplementedError, match=r"Returning attention weights \(need_weights=True\)"):
            torch._native_multi_head_attention(*args)
        with pytest.raises(NotImplementedError, match="Arbitrary mask tensors not yet supported"):
            torch._native_multi_head_attention(*args, torch.zeros(4, 4, dtype=torch.bool, device=D),
                                               need_weights=False)


def test_fallback_only_for_unimplemented_ops_uses_the_devices_message():
    torch_neuron_sim.tracking.set_fallback_only_for_unimplemented(True)
    try:
        with pytest.raises(RuntimeError, match="^CPU fallback disabled because "
                                               "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1. Operation "
                                               r"aten::mm failed to execute on Neuron \(last implementation: "):
            torch.mm(torch.ones(2, 3, device=D), torch.ones(2, 3, device=D))
    finally:
        torch_neuron_sim.tracking.set_fallback_only_for_unimplemented(False)


# ---- 8. torch_neuronx internals its test helpers call ----------------------------------------
def test_internals_used_by_the_devices_test_helpers(plain_arena):
    g = torch_neuronx._C._get_default_generator(0)
    assert isinstance(g, torch.Generator) and g.device == torch.device("neuron:0")
    assert torch_neuronx._C._get_default_generator(1).device == torch.device("neuron:1")
    stats = torch_neuronx._C._get_compilation_cache_stats()
    assert {"total_entries", "cache_hits", "cache_misses", "hit_rate"} <= set(stats)
    # The caching allocator keeps a freed block in its segment (a cached block)
    # until emptyCache returns the segment.
    allocator = torch_neuronx._C.NeuronCachingAllocator
    allocator.emptyCache()
    reserved = torch_neuron_sim.memory_reserved(0)
    x = torch.empty(1 << 20, device="neuron:0")  # 4 MiB: a new 20 MB large-pool segment
    assert torch_neuron_sim.memory_reserved(0) == reserved + (20 << 20)
    cached = allocator.getCachedBlocks()
    del x
    assert torch_neuron_sim.memory_reserved(0) == reserved + (20 << 20) and allocator.getCachedBlocks() == cached
    allocator.emptyCache()
    assert torch_neuron_sim.memory_reserved(0) == reserved and allocator.getCachedBlocks() < cached + 1


def test_host_bounces_go_through_the_nrt_copy_entry_points():
    from unittest import mock

    c = torch_neuronx._C
    with mock.patch.object(c, "_nrt_copy_cpu_to_neuron_tensor", wraps=c._nrt_copy_cpu_to_neuron_tensor) as w, \
            mock.patch.object(c, "_nrt_copy_neuron_to_cpu_tensor", wraps=c._nrt_copy_neuron_to_cpu_tensor) as r:
        x = torch.arange(6.0).to(D)
        y = (x * 2).cpu()
    assert y.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert w.call_count == 1 and r.call_count == 1
    assert torch.arange(3.0).to(D).cpu().tolist() == [0.0, 1.0, 2.0]  # unpatched again


def test_bounce_counting_by_replacing_the_entry_points_as_the_device_helpers_do():
    # torch_neuronx's count_cpu_bounce_calls imports the submodule and assigns wrappers to it (_bounces, below).
    a = torch.randn(4, 3, device=D)
    out = {}
    assert _bounces(lambda: out.update(b=a + a)) == {"reads": 0, "writes": 0}  # native: no host bounce
    assert _bounces(lambda: torch.trace(a)) == {"reads": 1, "writes": 1}  # a fallback: the input out, the result back
    torch.testing.assert_close(out["b"].cpu(), 2 * a.cpu())


def test_torch_neuronx_utils_helpers():
    from torch_neuronx.utils import (
        get_neuron_registered_ops, get_platform_target, is_sync_mode_enabled, suppress_specific_warnings,
        use_mlir_aten_ops,
    )
    import warnings

    assert get_platform_target() == torch_neuronx.get_device_properties(0).name
    import os

    assert is_sync_mode_enabled() == (os.environ["NEURON_LAUNCH_BLOCKING"] == "1")  # "1" unless set otherwise
    assert use_mlir_aten_ops() is True  # torch_neuronx's import default
    ops = get_neuron_registered_ops(as_sorted=True, keep_variant=True)
    assert ops == sorted(ops) and {"add.Tensor", "linear", "empty.memory_format", "argsort.stable"} <= set(ops)
    assert "softmax.int" not in ops  # decomposed by PyTorch before the device sees it
    assert "add" in get_neuron_registered_ops()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        shown = []
        saved = warnings.showwarning
        warnings.showwarning = lambda *a, **k: shown.append(str(a[0]))
        try:
            with suppress_specific_warnings(["noisy"]):
                warnings.warn("a noisy warning")
                warnings.warn("a useful warning")
        finally:
            warnings.showwarning = saved
    assert shown == ["a useful warning"]


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


# ---- 9. memory formats, as in the release build ---------------------------------------------
CL, CL3 = torch.channels_last, torch.channels_last_3d


def test_channels_last_clone_runs_on_the_device():
    x = torch.randn(2, 3, 4, 5)
    v = torch.randn(2, 3, 4, 5, 6)
    xd, vd = x.to(D), v.to(D)
    with track_neuron_ops() as ops:
        y = xd.clone(memory_format=CL)
        w = vd.clone(memory_format=CL3)
    assert y.device.type == "neuron" and y.is_contiguous(memory_format=CL) and not y.is_contiguous()
    assert w.is_contiguous(memory_format=CL3)
    assert torch.equal(y.cpu(), x) and torch.equal(w.cpu(), v)
    assert "aten::clone" in ops.executed and ops.fallback == []


def test_contiguous_accepts_preserve_format():
    x = torch.arange(12.0).reshape(3, 4)
    y = x.to(D).t().contiguous(memory_format=torch.preserve_format)  # the CPU refuses preserve_format
    assert y.is_contiguous() and torch.equal(y.cpu(), x.t())


def test_channels_last_contiguous_and_to_fall_back_to_the_cpu():
    x = torch.randn(2, 3, 4, 5)
    xd = x.to(D)
    with track_neuron_ops() as ops:
        a = xd.contiguous(memory_format=CL)
        b = xd.to(memory_format=CL)
        c = torch.randn(2, 3, 2, 2, 2).to(D).contiguous(memory_format=CL3)
    for t in (a, b):
        assert t.device.type == "neuron" and t.is_contiguous(memory_format=CL) and torch.equal(t.cpu(), x)
    assert c.device.type == "neuron" and c.is_contiguous(memory_format=CL3)
    assert {"aten::contiguous", "aten::_to_copy"} <= set(ops.fallback)
    assert "aten::clone" not in ops.executed  # the device's contiguous, not PyTorch's decomposition
    g = xd.clone().requires_grad_()
    (g.contiguous(memory_format=CL) * torch.arange(5.0, device=D)).sum().backward()
    assert torch.equal(g.grad.cpu(), torch.arange(5.0).expand(2, 3, 4, 5))
    assert xd.to(memory_format=CL).to("cpu").is_contiguous(memory_format=CL)


def test_channels_last_refused_only_when_fallback_is_disabled():
    xd = torch.randn(2, 3, 4, 5, device=D)
    torch_neuron_sim.tracking.set_fallback_only_for_unimplemented(True)
    try:
        for convert in (lambda: xd.contiguous(memory_format=CL), lambda: xd.to(memory_format=CL)):
            with pytest.raises(RuntimeError, match="^CPU fallback disabled because TORCH_NEURONX_FALLBACK_ONLY_FOR_"
                                                   "UNIMPLEMENTED_OPS=1.*Neuron tensors only support contiguous or "
                                                   "preserve memory format"):
                convert()
        assert xd.clone(memory_format=CL).is_contiguous(memory_format=CL)  # clone is implemented
    finally:
        torch_neuron_sim.tracking.set_fallback_only_for_unimplemented(False)
    assert xd.contiguous(memory_format=CL).is_contiguous(memory_format=CL)


class _Block(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(c)
        self.conv2 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


def _resnet():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                               _Block(8), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4))


def test_a_channels_last_resnet_trains_as_on_the_cpu_and_the_report_shows_the_fallbacks():
    torch.manual_seed(0)
    cpu = _resnet()
    dev = _resnet()
    dev.load_state_dict(cpu.state_dict())
    x, target = torch.randn(4, 3, 8, 8), torch.tensor([0, 1, 2, 3])
    cpu = cpu.to(memory_format=CL)
    with torch_neuron_sim.report() as r:
        dev = dev.to(D).to(memory_format=CL)
        opt = torch.optim.SGD(dev.parameters(), lr=0.1)
        xd, td = x.to(D).contiguous(memory_format=CL), target.to(D)
        for _ in range(3):
            opt.zero_grad()
            loss = F.cross_entropy(dev(xd), td)
            loss.backward()
            opt.step()
    opt_cpu = torch.optim.SGD(cpu.parameters(), lr=0.1)
    xc = x.contiguous(memory_format=CL)
    for _ in range(3):
        opt_cpu.zero_grad()
        loss_cpu = F.cross_entropy(cpu(xc), target)
        loss_cpu.backward()
        opt_cpu.step()
    torch.testing.assert_close(loss.cpu(), loss_cpu, rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(dev.named_parameters(), cpu.parameters()):
        torch.testing.assert_close(p.cpu(), q.detach(), rtol=1e-4, atol=1e-5, msg=name)
    assert {"aten::_to_copy", "aten::contiguous"} <= set(r.fallback_ops)


def test_opinfo_cells_with_channels_last_samples_match_the_cpu():
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent / "opinfo"))
    import opinfo_suite as suite
    from torch.testing._internal.common_methods_invocations import op_db

    ops = {suite.op_key(op): op for op in op_db}
    for key in ("cat", "nn.functional.interpolate.nearest", "nn.functional.interpolate.nearest-exact"):
        for direction in ("fwd", "bwd"):  # every sample, the channels-last ones included
            result = suite.check_op(ops[key], "float32", direction, max_samples=100)
            assert result.status == suite.PASS, (key, direction, result.detail)


# ---- 10. the environment, streams, devices, memory ------------------------------------------
_RELEASE_ENV = {"NEURON_LAUNCH_BLOCKING": "1", "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS": "0",
                "TORCH_NEURONX_MLIR_ATEN_OPS": "1", "TORCH_NEURONX_RETAIN_DEVICE_MODE": "0",
                "NEURON_RT_ALLOW_LEGACY_NEFF": "1", "NEURON_RT_DBG_ZEROCOPY": "1",
                "TORCH_NEURONX_ENABLE_ASYNC_NRT": "1", "TORCH_NEURONX_ENABLE_STACK_TRACE": "0",
                "JAX_LOGGING_LEVEL": "WARNING"}


def test_import_sets_the_environment_torch_neuronx_sets():
    import json
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in _RELEASE_ENV}
    env["JAX_LOGGING_LEVEL"] = "ERROR"  # a value the user set stays
    code = ("import os, json, torch, torch_neuron_sim; "
            f"print(json.dumps({{k: os.environ.get(k) for k in {sorted(_RELEASE_ENV)!r}}}))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == {**_RELEASE_ENV, "JAX_LOGGING_LEVEL": "ERROR"}


def test_tracking_names_follow_the_torch_mlir_op_set_import_selects():
    # TORCH_NEURONX_MLIR_ATEN_OPS=1, set on import, selects the torch-mlir registrations: clamp
    # with tensor bounds and the out= forms of eye/zeros run on the device under their own
    # overloads; the in-place clamp_ reaches the registered out= kernel. A fresh process, as
    # a user's program starts: the variable unset, then the import.
    import json
    import os
    import subprocess

    code = """
        import json, os, torch, torch_neuron_sim
        torch_neuron_sim.install_torch_neuronx_alias()
        import torch_neuronx
        from torch_neuron_sim.testing import check_op_runs_on_neuron
        D = "neuron"
        xc = torch.randn(4, 4)
        loc, hic = torch.full((4, 4), -0.5), torch.full((4, 1), 0.5)
        x, lo, hi = xc.to(D), loc.to(D), hic.to(D)
        ones = torch.ones(2, 3, device=D)  # zeros(out=) must overwrite it
        cases = [
            ("aten::clamp.Tensor", lambda: torch.clamp(x, lo, hi), torch.clamp(xc, loc, hic)),
            ("aten::clamp.Tensor", lambda: x.clamp(min=lo), xc.clamp(min=loc)),
            ("aten::clamp.Tensor_out", lambda: torch.clamp(x, lo, hi, out=torch.empty(4, 4, device=D)),
             torch.clamp(xc, loc, hic)),
            ("aten::clamp.Tensor_out", lambda: x.clone().clamp_(lo, hi), torch.clamp(xc, loc, hic)),
            ("aten::clamp", lambda: torch.clamp(x, -0.5, 0.5), torch.clamp(xc, -0.5, 0.5)),
            ("aten::eye.out", lambda: torch.eye(3, out=torch.empty(3, 3, device=D)), torch.eye(3)),
            ("aten::eye.m_out", lambda: torch.eye(3, 5, out=torch.empty(3, 5, device=D)), torch.eye(3, 5)),
            ("aten::eye.m", lambda: torch.eye(3, 5, device=D), torch.eye(3, 5)),
            ("aten::zeros.out", lambda: torch.zeros(2, 3, out=ones), torch.zeros(2, 3)),
            ("aten::zeros", lambda: torch.zeros(2, 3, device=D), torch.zeros(2, 3)),
        ]
        results = []
        for name, run, expected in cases:
            torch_neuronx.clear_op_tracking()
            got = run()
            results.append([name, check_op_runs_on_neuron(name), sorted(torch_neuronx.get_executed_ops()),
                            torch_neuronx.get_fallback_ops(), got.device.type == "neuron"
                            and torch.equal(got.cpu(), expected)])
        print(json.dumps([os.environ["TORCH_NEURONX_MLIR_ATEN_OPS"], torch_neuronx.utils.use_mlir_aten_ops(),
                          results]))
    """
    env = {k: v for k, v in os.environ.items() if k != "TORCH_NEURONX_MLIR_ATEN_OPS"}
    out = subprocess.run([sys.executable, "-c", __import__("textwrap").dedent(code)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    value, mlir, results = json.loads(out.stdout.splitlines()[-1])
    assert value == "1" and mlir is True
    for name, runs, executed, fallbacks, equal in results:
        assert runs and fallbacks == [], (name, executed, fallbacks)
        assert set(executed) - {name, "aten::empty", "aten::clone"} == set(), (name, executed)
        assert equal, name


def test_streams_read_host_cc_each_time_one_is_created(monkeypatch):
    default = torch_neuronx.default_stream()
    monkeypatch.setenv("NEURON_RT_ENABLE_HOST_CC", "1")  # set after import, no other call
    s, t = torch.neuron.Stream(), torch.neuron.Stream()
    assert s != default and t != default and s != t
    monkeypatch.setenv("NEURON_RT_ENABLE_HOST_CC", "true")  # only exactly "1"
    assert torch.neuron.Stream() == default
    monkeypatch.delenv("NEURON_RT_ENABLE_HOST_CC")
    assert torch.neuron.Stream() == default and torch.Stream(device="neuron") == default
    assert not hasattr(torch_neuron_sim._C, "_reread_host_cc")


def test_more_cores_than_a_chip_are_a_multi_chip_instance():
    from conftest import run_python

    code = """
        import torch, torch_neuron_sim
        print(torch.neuron.device_count(), torch.ones(2, device="neuron:7").device, torch.neuron.get_device_properties(7))
        try:
            torch.ones(2).to("neuron:20")
        except RuntimeError as e:
            print(type(e).__name__, e)
    """
    ok = run_python(code, env={"NEURON_RT_NUM_CORES": "8", "NEURON_SIM_HBM_GB": "1"})
    assert ok.returncode == 0, ok.stderr
    lines = ok.stdout.splitlines()
    assert lines[0].startswith("8 neuron:7 <NeuronDeviceProperties(name='trn2'")
    assert lines[1] == "RuntimeError Device index 20 is out of range. Valid range is 0 to 7 for this process"
    for n in ("16", "64"):
        r = run_python("import torch, torch_neuron_sim; print(torch.neuron.device_count())",
                       env={"NEURON_RT_NUM_CORES": n, "NEURON_SIM_HBM_GB": "1"})
        assert r.returncode == 0 and r.stdout.split() == [n], r.stderr
    r = run_python("import torch, torch_neuron_sim; print(torch.neuron.device_count())",
                   env={"NEURON_RT_VISIBLE_CORES": "6-7", "NEURON_SIM_HBM_GB": "1"})
    assert r.returncode == 0 and r.stdout.split() == ["2"], r.stderr
    too_many = run_python("import torch, torch_neuron_sim; torch.neuron.device_count()",
                          env={"NEURON_RT_NUM_CORES": "65", "NEURON_SIM_HBM_GB": "1"})
    assert too_many.returncode != 0
    assert "NEURON_RT_NUM_CORES=65, but the largest trn2 instance (trn2.48xlarge, 16 chips) has 64" in too_many.stderr


def test_reserved_memory_is_what_the_device_reports():
    # The release's caching allocator: reserved (segments) >= allocated
    # (blocks) >= active (bytes asked for), the same numbers on every API.
    x = torch.empty(1000, device=D)
    y = torch.empty(3 * 2**20 // 4, device=D)  # 3 MiB: the large pool
    keys = ("reserved_bytes.all.current", "allocated_bytes.all.current", "active_bytes.all.current")
    for mod in (torch.neuron, torch_neuronx, torch_neuron_sim):
        stats = mod.memory_stats()
        reserved, allocated, active = (stats[k] for k in keys)
        assert reserved >= allocated >= active >= 4000 + 3 * 2**20
        assert mod.memory_reserved() == reserved and mod.memory_allocated() == allocated
        assert mod.max_memory_reserved() >= reserved
    assert torch.accelerator.memory_reserved() == torch.neuron.memory_reserved()
    assert torch.accelerator.memory_allocated() == torch.neuron.memory_allocated()
    summary = torch.neuron.memory_summary()
    reserved_row = next(line for line in summary.splitlines() if line.startswith(" Reserved memory"))
    assert reserved_row.split()[2:4] == [f"{torch.neuron.memory_reserved() / 2**20:.2f}", "MiB"]
    del x, y


def test_entry_points_restored_by_assignment_stop_routing_copies():
    # count_cpu_bounce_calls restores the originals by assignment (_bounces, below): copies
    # then run directly again, without calling into Python.
    from unittest import mock

    assert _bounces(lambda: torch.arange(3.0).to(D).cpu()) == {"reads": 1, "writes": 1}
    assert not any(n in vars(torch_neuronx._C) for n in _COPY_ENTRIES)
    core = torch_neuron_sim._C  # what the entry points call to copy
    with mock.patch.object(core, "_nrt_copy", wraps=core._nrt_copy) as direct:
        assert torch.arange(3.0).to(D).cpu().tolist() == [0.0, 1.0, 2.0]
    assert direct.call_count == 0
    with mock.patch.object(torch_neuronx._C, "_nrt_copy_cpu_to_neuron_tensor",
                           wraps=torch_neuronx._C._nrt_copy_cpu_to_neuron_tensor) as write:
        torch.arange(3.0).to(D)
        del torch_neuronx._C._nrt_copy_cpu_to_neuron_tensor  # a deleted replacement restores the original too
        torch.arange(3.0).to(D)
    assert write.call_count == 1 and "_nrt_copy_cpu_to_neuron_tensor" not in vars(torch_neuronx._C)


# ---- 11. internals torch_neuronx's tests patch or call --------------------------------------
def _bounces(fn):
    # torch_neuronx's count_cpu_bounce_calls: replace the entry points on the submodule, count, restore.
    import torch_neuronx._C as C

    counts = {"reads": 0, "writes": 0}
    read, write = C._nrt_copy_neuron_to_cpu_tensor, C._nrt_copy_cpu_to_neuron_tensor

    def counted(kind, entry):
        def wrapper(*args, **kwargs):
            counts[kind] += 1
            return entry(*args, **kwargs)
        return wrapper

    C._nrt_copy_neuron_to_cpu_tensor, C._nrt_copy_cpu_to_neuron_tensor = counted("reads", read), counted("writes", write)
    try:
        fn()
    finally:
        C._nrt_copy_neuron_to_cpu_tensor, C._nrt_copy_cpu_to_neuron_tensor = read, write
    return counts


def test_device_casts_bounce_through_the_host_only_for_64_bits():
    x = torch.randn(16, 16, device=D)
    out = {}
    assert _bounces(lambda: out.update(h=x.to(dtype=torch.float16))) == {"reads": 0, "writes": 0}
    assert out["h"].device.type == "neuron" and out["h"].dtype == torch.float16
    assert _bounces(lambda: out.update(d=x.to(dtype=torch.float64))) == {"reads": 1, "writes": 1}
    assert out["d"].device.type == "neuron" and torch.equal(out["d"].cpu(), x.cpu().double())
    assert _bounces(lambda: out["d"].t().contiguous()) == {"reads": 0, "writes": 0}  # no cast, no bounce
    from unittest import mock

    with mock.patch("torch_neuronx._C._nrt_copy_neuron_to_cpu_tensor",
                    wraps=torch_neuronx._C._nrt_copy_neuron_to_cpu_tensor) as read:
        x.to(dtype=torch.int64)
    assert read.call_count == 1


def test_device_internals_tests_patch():
    from unittest import mock

    from torch_neuronx import neuron

    assert torch_neuronx._C._vnc_count() == torch_neuronx.device_count() >= 1
    props = torch_neuronx._C._neuron_getDeviceProperties(0)
    assert (props.name, props.total_memory) == (torch.neuron.get_device_properties(0).name,
                                               torch.neuron.get_device_properties(0).total_memory)
    for arg, expected in ((1, 1), (0, 0), (torch.device("neuron:2"), 2), (None, 3)):
        with mock.patch("torch_neuronx.set_device") as set_device, \
                mock.patch("torch_neuronx.neuron.current_device", return_value=3):
            neuron.set_device(arg)
        set_device.assert_called_once_with(expected)
    fake = mock.MagicMock(total_memory=0)
    with mock.patch("torch_neuronx._C._neuron_getDeviceProperties", return_value=fake) as get, \
            mock.patch("torch_neuronx.neuron.current_device", return_value=0):
        assert neuron.get_device_properties().total_memory == 0
        assert neuron.get_device_properties("neuron:1").total_memory == 0
    assert get.call_args_list == [mock.call(0), mock.call(1)]
    with mock.patch("torch_neuronx._C._neuron_setDevice") as low:
        torch_neuronx.set_device(1)
    low.assert_called_once_with(1)
    assert torch_neuronx.current_device() == 0  # the patched call did nothing


def test_registered_ops_include_the_devices_own_kernels():
    from torch_neuronx.utils import get_neuron_registered_ops

    ops = get_neuron_registered_ops()
    # its C++ and Python registrations (contiguous, _to_copy), and ops PyTorch has no CPU kernel for
    assert {"contiguous", "_to_copy", "clone", "convolution", "linear_backward", "batch_norm_backward_reduce"} <= ops
    assert "softmax.int" not in get_neuron_registered_ops(keep_variant=True)


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


# ---- 12. backward ops and their output masks --------------------------------------------------
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
    # convolution_backward and native_layer_norm_backward: as the CPU, mask by mask (None where not asked)
    x, w, gy = torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3), torch.randn(2, 4, 4, 4)
    conv = ([4], [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    for m in masks:
        ref = torch.ops.aten.convolution_backward(gy, x, w, *conv, m)
        got = torch.ops.aten.convolution_backward(gy.to(D), x.to(D), w.to(D), *conv, m)
        _same_outputs(got, ref, f"convolution_backward {m}")
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


# ---- 13. messages and exception types code matches on ----------------------------------------
def test_mm_shape_errors_are_the_devices():
    a = torch.randn(2, 3, device=D)
    with pytest.raises(RuntimeError, match=r"^a and b must have same reduction dim, but got \[2, 3\] X \[2, 3\]\."):
        torch.mm(a, a)
    with pytest.raises(RuntimeError, match="^a must be 2D"):
        torch.mm(torch.randn(3, device=D), a)
    with pytest.raises(RuntimeError, match="^b must be 2D"):
        torch.mm(a.t(), torch.randn(2, device=D))
    with pytest.raises(RuntimeError, match=r"must have same reduction dim"):
        torch.mm(a, a, out=torch.empty(2, 2, device=D))
    torch_neuron_sim.tracking.set_fallback_only_for_unimplemented(True)
    try:
        with pytest.raises(RuntimeError, match=r"^CPU fallback disabled .* Operation aten::mm failed to execute on "
                                               r"Neuron .*Details: .*a and b must have same reduction dim"):
            torch.mm(a, a)
    finally:
        torch_neuron_sim.tracking.set_fallback_only_for_unimplemented(False)
    torch.testing.assert_close((a @ a.t()).cpu(), a.cpu() @ a.cpu().t())  # the process stays usable


def test_an_out_of_bounds_index_is_a_runtime_error():
    x = torch.arange(4.0, device=D)
    for idx in (torch.tensor([0, 5], device=D), torch.tensor([5]), torch.tensor([-5], device=D)):
        with pytest.raises(RuntimeError, match=r"index -?5 is out of bounds for dimension 0 with size 4") as info:
            x[idx]
        assert not isinstance(info.value, IndexError)
    m = torch.zeros(2, 3, device=D)
    with pytest.raises(RuntimeError, match="index 3 is out of bounds for dimension 1 with size 3"):
        m[:, torch.tensor([3], device=D)]
    assert x[torch.tensor([3, -1], device=D)].cpu().tolist() == [3.0, 3.0]


def test_argument_errors_with_the_devices_types_and_messages():
    a = torch.randn(4, 3, device=D)
    with pytest.raises(RuntimeError, match="Tensor list must have same number of elements as scalar list"):
        torch._foreach_add([a, a], [1.0])
    with pytest.raises(TypeError, match="cumsum\\(\\): argument 'dim' must be int, not float"):
        torch.cumsum(a, dim=1.5)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 5\)"):
        torch.index_select(a, 5, torch.tensor([0], device=D))
    with pytest.raises(IndexError, match="index out of range in self"):
        torch.index_select(a, 0, torch.tensor([7], device=D))
    with pytest.raises(TypeError, match="must be Tensor, not list"):
        torch.index_select(a, 0, [0])
    out = torch.zeros(4, 4, device=D).t()
    with pytest.raises(RuntimeError, match="^CPU fallback failed. Cannot copy result to output tensor which is not "
                                           "contiguous"):
        torch.add(a, 1, out=out[:, :3])
    assert out.cpu().eq(0).all()
    assert torch.add(a, 1, out=torch.empty(4, 3, device=D)).cpu().equal(a.cpu() + 1)  # a contiguous out= is fine
    with pytest.raises(ValueError, match="Invalid device specification: 1.5"):
        torch.neuron.device(1.5)
    with pytest.raises(ValueError, match="Expected neuron device, got cpu"):
        torch.neuron.device(torch.device("cpu"))
    with pytest.raises(ValueError, match="Incorrect device argument found, expected torch.device or int type, "
                                         "found <class 'str'>"):
        torch.neuron.get_device_name("invalid")
    assert torch.neuron.get_device_name(torch.device("neuron:2")) == "neuron:2"
    assert torch.neuron.get_device_name(1) == "neuron:1"


_EVENT_KINDS = {
    "torch.neuron.Event": lambda timing: torch.neuron.Event(enable_timing=timing),
    "torch_neuronx.Event": lambda timing: torch_neuronx.Event(enable_timing=timing),
    "torch.Event": lambda timing: torch.Event("neuron", enable_timing=timing),
}


@pytest.mark.parametrize("kind", sorted(_EVENT_KINDS))
def test_elapsed_time_misuse_raises_cudas_exception_and_words(kind):
    # PyTorch raises these as ValueError for CUDA events (c10::cuda::CUDAEvent) and for every
    # torch.Event (c10::impl::InlineEvent, which checks before asking the backend); code
    # written for torch.cuda.Event catches the same type here.
    make = _EVENT_KINDS[kind]
    untimed = make(False), make(False)
    for e in untimed:
        e.record()
    timed = make(True), make(True)
    for a, b in ((untimed[0], untimed[1]), (timed[0], untimed[1]), (untimed[0], timed[0])):
        with pytest.raises(ValueError,
                           match=re.escape("Both events must be created with argument 'enable_timing=True'.")) as err:
            a.elapsed_time(b)
        assert type(err.value) is ValueError
    timed[0].record()
    for a, b in ((timed[0], timed[1]), (timed[1], timed[0])):
        with pytest.raises(ValueError,
                           match=re.escape("Both events must be recorded before calculating elapsed time.")) as err:
            a.elapsed_time(b)
        assert type(err.value) is ValueError
    timed[1].record()
    other = torch.Event("neuron", enable_timing=True)  # events of every kind time against each other
    other.record()
    assert timed[0].elapsed_time(timed[1]) >= 0 and timed[0].elapsed_time(other) >= 0
    assert other.elapsed_time(timed[0]) <= 0


def test_index_copy_broadcasts_the_source_as_the_device_does():
    idx = torch.tensor([0, 2])
    rows = [[1.0] * 3, [0.0] * 3, [1.0] * 3, [0.0] * 3, [0.0] * 3]
    for source in (torch.ones(1, 3), torch.ones(3), torch.tensor(1.0)):
        with pytest.raises(IndexError, match=r"index_copy_\(\)"):
            torch.zeros(5, 3).index_copy(0, idx, source)  # the CPU wants the slices' exact shape
        src = source.to(D)
        for name, run in (
            ("aten::index_copy", lambda: torch.zeros(5, 3, device=D).index_copy(0, idx.to(D), src)),
            ("aten::index_copy_", lambda: torch.zeros(5, 3, device=D).index_copy_(0, idx.to(D), src)),
            ("aten::index_copy.out", lambda: torch.index_copy(torch.zeros(5, 3, device=D), 0, idx.to(D), src,
                                                              out=torch.empty(5, 3, device=D))),
        ):
            with track_neuron_ops() as ops:
                got = run()
            assert got.cpu().tolist() == rows, (name, tuple(source.shape))
            assert name in ops.executed and ops.fallback == [], (name, ops.executed, ops.fallback)
    y = torch.zeros(5, 3, device=D)
    y.index_copy_(1, torch.tensor([1], device=D), torch.full((5, 1), 2.0, device=D))  # the exact shape still works
    assert y.cpu()[:, 1].tolist() == [2.0] * 5
    with pytest.raises(RuntimeError, match="Source/destination tensor must have same slice shapes"):
        y.index_copy_(0, idx.to(D), torch.ones(2, 2, device=D))  # does not broadcast: refused, in the CPU's words
    assert y.cpu()[:, 1].tolist() == [2.0] * 5 and y.cpu()[:, 0].eq(0).all()  # left as it was


def test_in_place_add_into_non_contiguous_tensors():
    # add_ on a view writes through its strides, as on the CPU; add(out=) into a
    # non-contiguous tensor is refused with the device's fallback error (the out tensor
    # untouched), or under TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1 with the
    # disabled-fallback error.
    ac = torch.randn(4, 3)
    a = ac.to(D)
    for view in (lambda t: t[:, :3], lambda t: t.t()[:3].t()):
        yc, y = torch.zeros(4, 4), torch.zeros(4, 4, device=D)
        with track_neuron_ops() as ops:
            view(y).add_(a, alpha=2)
            view(y).add_(1)
        view(yc).add_(ac, alpha=2)
        view(yc).add_(1)
        assert torch.equal(y.cpu(), yc)
        assert "aten::add_.Tensor" in ops.executed and ops.fallback == []
    out = torch.zeros(4, 4, device=D)
    with pytest.raises(RuntimeError, match="^CPU fallback failed. Cannot copy result to output tensor which is not "
                                           "contiguous"):
        torch.add(a, a, out=out[:, :3])
    torch_neuron_sim.tracking.set_fallback_only_for_unimplemented(True)
    try:
        with pytest.raises(RuntimeError, match="^CPU fallback disabled because TORCH_NEURONX_FALLBACK_ONLY_FOR_"
                                               r"UNIMPLEMENTED_OPS=1. Operation aten::add.out failed to execute on "
                                               r"Neuron \(last implementation: EmulatorKernel\)"):
            torch.add(a, 1, out=out[:, :3])
    finally:
        torch_neuron_sim.tracking.set_fallback_only_for_unimplemented(False)
    assert out.cpu().eq(0).all()
    torch.add(a, 1, out=out[:, :3].contiguous())  # the process goes on


@pytest.mark.parametrize("call", [
    lambda a, out: torch.mul(a, a, out=out),            # native
    lambda a, out: torch.mm(a, a.t()[:, :3], out=out),   # native, with a fast path for its out=
    lambda a, out: torch.maximum(a, a, out=out),        # a fallback op
    lambda a, out: torch.deg2rad(a.t(), out=out.t()),   # a composite, through mul.out
])
def test_other_out_ops_write_through_non_contiguous_tensors(call):
    # add.out's refusal is the device's for that op only (device_checks.cpp): the others
    # write through strides as on the CPU, as PyTorch's composites rely on.
    ac = torch.randn(4, 3)
    outc, out = torch.zeros(4, 4), torch.zeros(4, 4, device=D)
    call(ac, outc[:, :3])
    call(ac.to(D), out[:, :3])
    assert torch.equal(out.cpu(), outc)
