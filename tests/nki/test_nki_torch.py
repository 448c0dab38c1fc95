"""NKI kernels inside PyTorch programs: torch_neuronx.wrap_nki and nki_op on
`neuron` (arena memory read and written in place), mutable arguments, grids
and constants, op tracking, the migration report, the device timeline and
estimate(), nki.simulate on NumPy arrays, and the `nki` / legacy
`neuronxcc.nki` module names."""
import sys

import numpy as np
import pytest
import torch

import torch_neuron_sim
import torch_neuron_sim.nki.isa as nisa
import torch_neuron_sim.nki.language as nl
from torch_neuron_sim import nki, profiler
from torch_neuron_sim.nki import NKIError
from torch_neuron_sim.nki.torch_wiring import nki_op, wrap_nki
from torch_neuron_sim.nki.typing import mutable_tensor

from _nki_examples import load, remove_aliases

add = load("tiled_add")


@nki.jit
def scale_rows(x, factor):
    """out = x * factor (a compile-time constant), 128 rows per grid instance."""
    i = nl.program_id(0)
    rows = slice(i * 128, min((i + 1) * 128, x.shape[0]))
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x[rows, :])
    nl.store(out[rows, :], nl.multiply(t, factor))
    return out


@nki.jit
def add_into(x, y: mutable_tensor):
    """y += x in place (y annotated mutable)."""
    t = nl.load(x)
    u = nl.load(y)
    nl.store(y, nl.add(t, u))
    return y


@nki.jit
def add_into_plain(x, y):
    nl.store(y, nl.add(nl.load(x), nl.load(y)))
    return None


def test_grid_and_constants_on_neuron():
    x = torch.randn(300, 64, device="neuron")
    out = wrap_nki(scale_rows)[3](x, 2.5)
    assert out.device.type == "neuron"
    torch.testing.assert_close(out, x * 2.5)
    torch.testing.assert_close(wrap_nki(scale_rows)[3](x, factor=-1.0), -x)


def test_kernel_writes_arena_memory_in_place():
    x = torch.randn(64, 32, device="neuron")
    y = torch.randn(64, 32, device="neuron")
    expected = (x + y).cpu()
    ptr = y.data_ptr()
    out = wrap_nki(add_into)(x, y)
    assert out is y and y.data_ptr() == ptr
    torch.testing.assert_close(y.cpu(), expected)


def test_nki_op_mutates_args_reach_the_caller_eager_and_compiled():
    op = nki_op("nki_test::add_into", _add_into_fn, mutates_args={"y"})
    x = torch.randn(32, 16, device="neuron")
    y = torch.zeros(32, 16, device="neuron")
    op(x, y)
    torch.testing.assert_close(y, x)
    compiled = torch.compile(lambda a, b: op(a, b), backend="neuron", fullgraph=True)
    compiled(x, y)
    torch.testing.assert_close(y, 2 * x)


def _add_into_fn(x: torch.Tensor, y: torch.Tensor) -> None:
    wrap_nki(add_into_plain)(x, y)


def test_nki_op_register_autograd_and_fake():
    def fn(x: torch.Tensor) -> torch.Tensor:
        return wrap_nki(scale_rows)[1](x, 3.0)

    op = nki_op("nki_test::triple", fn)
    op.register_autograd(lambda ctx, g: g * 3.0)
    x = torch.randn(16, 8, device="neuron", requires_grad=True)
    op(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.full_like(x, 3.0))
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        fake = op(torch.empty(16, 8))
    assert fake.shape == (16, 8) and fake.dtype == torch.float32


def test_mixed_devices_are_refused():
    with pytest.raises(NKIError, match=r"tensor arguments are on different devices \('a' on neuron:0, 'b' on cpu\)"):
        wrap_nki(add.add_kernel)(torch.ones(4, 4, device="neuron"), torch.ones(4, 4))
    torch.testing.assert_close(wrap_nki(add.add_kernel)(torch.ones(2, 2), torch.ones(2, 2)), torch.full((2, 2), 2.0))


def test_op_tracking_report_and_estimate():
    x = torch.randn(128, 512, device="neuron")
    torch_neuron_sim.tracking.clear_op_tracking()
    with torch_neuron_sim.report() as r:
        wrap_nki(add.add_kernel)(x, x)
    assert "nki_add_kernel" in torch_neuron_sim.tracking.get_executed_ops()
    assert r.data["nki_kernels"] == [{"kernel": "nki_add_kernel", "count": 1}]
    assert "NKI kernels used: 1 kernel(s), 1 launch(es)" in r.text()

    est = torch_neuron_sim.estimate(lambda: wrap_nki(add.add_kernel)(x, x))
    row = est.nki_kernels["nki_add_kernel"]
    assert row["count"] == 1 and row["dma"] > 0 and row["vector"] > 0 and row["tensor"] == 0
    # The launch is one device event whose time is its engines' sum plus one launch overhead.
    kernel_rows = [o for o in est.ops if o.name == "nki_add_kernel"]
    assert len(kernel_rows) == 1 and kernel_rows[0].count == 1
    engines = sum(row[e] for e in ("tensor", "vector", "scalar", "gpsimd", "dma"))
    assert kernel_rows[0].seconds == pytest.approx(engines + est.model["launch_overhead_s"])
    assert "NKI kernel" in est.table()


def test_cost_grows_with_the_work_and_uses_the_profiles_peak():
    mm = load("matmul")
    a = torch.randn(256, 128, device="neuron").bfloat16()
    b = torch.randn(256, 512, device="neuron").bfloat16()
    rows = {}
    for profile in ("trn1", "trn2"):
        est = torch_neuron_sim.estimate(lambda: wrap_nki(mm.matmul_kernel)(a, b), profile=profile)
        rows[profile] = est.nki_kernels["nki_matmul_kernel"]
    flops = 2 * 256 * 128 * 512
    model = profiler.model_figures("trn2")
    k = torch_neuron_sim.nki.cost.constants()
    issue = k["issue_cycles"] / k["engine_hz"]
    assert rows["trn2"]["tensor"] == pytest.approx(flops / model["peak_flops"]["bfloat16"] + 2 * issue)
    assert rows["trn1"]["tensor"] > rows["trn2"]["tensor"]  # trn1's TensorE is slower


def test_profiler_timeline_event_has_the_engine_breakdown():
    x = torch.randn(128, 64, device="neuron")
    with profiler.timeline() as t:
        wrap_nki(scale_rows)[1](x, 2.0)
    events = [e for e in t.events if e["name"] == "nki_scale_rows"]
    assert len(events) == 1 and events[0]["kind"] == "kernel"
    assert set(events[0]["engines"]) == {"tensor", "vector", "scalar", "gpsimd", "dma"}
    assert events[0]["bytes"] == 2 * 128 * 64 * 4


def test_simulate_on_numpy_arrays_and_kernel_called_directly():
    a = np.random.rand(256, 512).astype(np.float32)
    out = nki.simulate(add.add_kernel)(a, a)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, 2 * a)
    x = torch.randn(128, 16, device="neuron")
    torch.testing.assert_close(scale_rows[1](x, 2.0), 2 * x)  # an @nki.jit kernel on neuron tensors


def test_nki_and_legacy_module_names_resolve_to_the_simulator():
    try:
        assert "nki" in torch_neuron_sim.nki.install_nki_alias()
        from neuronxcc import nki as legacy_nki
        import neuronxcc.nki.language as legacy_nl
        import nki.isa
        assert legacy_nki is torch_neuron_sim.nki and nki.isa is nisa and legacy_nl is nl

        @legacy_nki.jit
        def legacy_add(a_tensor, b_tensor):
            c_output = legacy_nl.ndarray(a_tensor.shape, a_tensor.dtype, buffer=legacy_nl.shared_hbm)
            ix = legacy_nl.arange(128)[:, None]
            iy = legacy_nl.arange(512)[None, :]
            a = legacy_nl.load(a_tensor[ix, iy])
            b = legacy_nl.load(b_tensor[ix, iy])
            legacy_nl.store(c_output[ix, iy], value=a + b)
            return c_output

        a = np.random.rand(128, 512).astype(np.float32)
        np.testing.assert_allclose(legacy_nki.simulate_kernel(legacy_add, a, a), 2 * a)

        import neuronxcc.nki.isa as legacy_isa

        @legacy_nki.jit
        def legacy_matmul(lhsT, rhs):
            out = legacy_nl.ndarray((128, 512), legacy_nl.float32, buffer=legacy_nl.shared_hbm)
            acc = legacy_nl.zeros((128, 512), legacy_nl.float32, buffer=legacy_nl.psum)
            for k in legacy_nl.affine_range(2):
                s = legacy_nl.load(lhsT[k * 128:(k + 1) * 128, :])
                m = legacy_nl.load(rhs[k * 128:(k + 1) * 128, :])
                acc[...] += legacy_isa.nc_matmul(s, m)   # the legacy ISA returns its result
            legacy_nl.store(out, value=legacy_nl.copy(acc))
            return out

        lhsT, rhs = np.random.rand(256, 128).astype(np.float32), np.random.rand(256, 512).astype(np.float32)
        np.testing.assert_allclose(legacy_nki.simulate_kernel(legacy_matmul, lhsT, rhs), lhsT.T @ rhs, rtol=1e-5)

        @legacy_nki.jit
        def legacy_mask(a_tensor):
            ix = legacy_nl.arange(128)[:, None]
            return legacy_nl.load(a_tensor[ix, 0:4], mask=(ix < 64))

        with pytest.raises(NKIError, match=r"is legacy NKI \(neuronxcc.nki\) and not supported by the simulator: slice"):
            legacy_nki.simulate_kernel(legacy_mask, a)
    finally:
        remove_aliases()


def test_alias_never_shadows_an_installed_nki(tmp_path, monkeypatch):
    (tmp_path / "nki").mkdir()
    (tmp_path / "nki" / "__init__.py").write_text("REAL = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert "nki" not in torch_neuron_sim.nki.install_nki_alias()
        import nki as real
        assert getattr(real, "REAL", False)
    finally:
        remove_aliases()


def test_pytorch_profiler_shows_the_launch_as_a_device_row():
    from torch.profiler import ProfilerActivity, profile
    x = torch.randn(128, 64, device="neuron")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p:
        wrap_nki(scale_rows)[1](x, 2.0)
    rows = {e.key: e for e in p.key_averages()}
    assert rows["nki_scale_rows"].device_time_total > 0
