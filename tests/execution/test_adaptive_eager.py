"""Adaptive eager (TORCH_NEURONX_ENABLE_CONCATENATION=1): runs of consecutive
device ops between flush points are one launch and one compilation per
distinct run; numerics and op tracking are those of plain eager."""
import copy

import pytest
import torch
import torch.nn.functional as F

import torch_neuron_sim
import torch_neuron_sim.nki.language as nl
from torch_neuron_sim import adaptive_eager, compile_cache, metrics, nki, profiler
from torch_neuron_sim.nki.torch_wiring import wrap_nki
from conftest import run_python
from test_training import OPTIMIZERS, SmallCNN, batches, mlp

DEV = "neuron"


@pytest.fixture
def counted():
    """Metrics on and cleared, compile cache empty, adaptive eager off after."""
    was = metrics.is_enabled()
    metrics.set_enabled(True)
    metrics.clear_all()
    compile_cache.clear()
    yield
    adaptive_eager.enable(False)
    metrics.clear_all()  # later tests start from no counts, as a fresh process does
    metrics.set_enabled(was)


def delta(before: dict, after: dict) -> dict:
    out = {k: after[k] - before[k] for k in after if k != "flushes"}
    out["flushes"] = {k: after["flushes"][k] - before["flushes"][k] for k in after["flushes"]}
    return out


def run(on: bool, fn):
    before = adaptive_eager.stats()
    with adaptive_eager.mode(on):
        out = fn()
    return out, delta(before, adaptive_eager.stats())


def train(model, data, make_opt):
    opt = make_opt(model.parameters())
    losses = []
    for x, y in data:
        x, y = x.to(DEV), y.to(DEV)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("opt", ["sgd", "adamw_foreach"])
@pytest.mark.parametrize("arch,shape,classes", [(mlp, (16, 20), 5), (SmallCNN, (8, 1, 14, 14), 10)])
def test_training_is_bit_identical_with_fewer_launches_and_compilations(counted, arch, shape, classes, opt):
    torch.manual_seed(0)
    model = arch().to(DEV)
    twin = copy.deepcopy(model)
    data = batches(shape, classes, 3)

    torch_neuron_sim.clear_op_tracking()
    compile_cache.clear()
    metrics.clear_all()
    plain, plain_stats = run(False, lambda: train(model, data, OPTIMIZERS[opt]))
    plain_ops = torch_neuron_sim.get_op_counts()
    plain_compiles = metrics.get_counter_value("CompilationCache.TotalCompilations")

    torch_neuron_sim.clear_op_tracking()
    compile_cache.clear()
    metrics.clear_all()
    fused, stats = run(True, lambda: train(twin, data, OPTIMIZERS[opt]))
    fused_ops = torch_neuron_sim.get_op_counts()
    fused_compiles = metrics.get_counter_value("CompilationCache.TotalCompilations")

    assert fused == plain  # bit-identical losses
    for a, b in zip(model.parameters(), twin.parameters()):
        assert torch.equal(a.cpu(), b.cpu())
    assert fused_ops == plain_ops  # op tracking stays per op
    assert plain_stats["ops"] == 0 and plain_stats["launches"] == 0  # off: nothing queued
    assert stats["ops"] > 0 and stats["fused_launches"] > 0
    assert stats["launches"] < stats["ops"]  # fewer launches than ops
    assert 0 < fused_compiles < plain_compiles
    assert metrics.get_counter_value("AdaptiveEager.Launches") == stats["launches"]
    assert stats["flushes"]["host_read"] >= 3  # loss.item() every step


@nki.jit
def double(x):
    """An NKI kernel: out = 2 * x."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(x), 2.0))
    return out


def chain(x):
    return ((x + 1) * 2 - 3).relu()  # four native ops


def test_flush_points_close_the_run(counted):
    x = torch.randn(64, device=DEV)
    cases = {
        "host_read": lambda y: y.item() if y.numel() == 1 else y.cpu(),
        "synchronize": lambda y: torch.neuron.synchronize(),
        "fallback": lambda y: torch.trace(y.view(8, 8)),  # not a native op: runs on the CPU
        "explicit": lambda y: adaptive_eager.flush(),
        "host_write": lambda y: torch.ones(3).to(DEV),
        "kernel_call": lambda y: wrap_nki(double)(y.view(8, 8)),  # an NKI kernel: a NEFF of its own
    }
    for reason, flush in cases.items():
        with adaptive_eager.mode(True):
            before = adaptive_eager.stats()
            y = chain(x)
            mid = delta(before, adaptive_eager.stats())
            flush(y)
            after = delta(before, adaptive_eager.stats())
        assert mid["ops"] == 4 and mid["launches"] == 0, reason  # queued: nothing launched yet
        assert after["launches"] == 1 and after["fused_launches"] == 1 and after["fused_ops"] == 4, reason
        assert after["flushes"][reason] == 1, (reason, after["flushes"])


def test_printing_flushes(counted, capsys):
    with adaptive_eager.mode(True):
        before = adaptive_eager.stats()
        print(chain(torch.randn(4, device=DEV)))
        after = delta(before, adaptive_eager.stats())
    assert after["launches"] >= 1 and after["flushes"]["host_read"] >= 1


def test_one_compilation_per_distinct_run(counted):
    x = torch.randn(32, device=DEV)
    with adaptive_eager.mode(True):
        before = adaptive_eager.stats()
        for _ in range(5):
            chain(x).sum().item()
        same = delta(before, adaptive_eager.stats())
        chain(torch.randn(16, device=DEV)).sum().item()  # new shapes: a new fused signature
        (x * 2 + 1).sum().item()                          # other ops: another one
        more = delta(before, adaptive_eager.stats())
    assert same["launches"] == 5 and same["compilations"] == 1 and same["cache_hits"] == 4
    assert more["compilations"] == 3


def test_op_order_is_part_of_the_signature(counted):
    x = torch.randn(8, device=DEV)
    with adaptive_eager.mode(True):
        before = adaptive_eager.stats()
        ((x + 1) * 2).sum().item()
        ((x * 2) + 1).sum().item()
        d = delta(before, adaptive_eager.stats())
    assert d["compilations"] == 2


def test_run_of_one_op_is_the_ops_own_compilation(counted):
    x = torch.randn(8, device=DEV)
    (x + 1).cpu()  # plain eager compiles add's signature
    with adaptive_eager.mode(True):
        before = adaptive_eager.stats()
        metrics.clear_all()
        (x + 1).cpu()
        d = delta(before, adaptive_eager.stats())
    assert d["launches"] == 1 and d["fused_launches"] == 0 and d["compilations"] == 0
    assert not metrics.get_counter_value("CompilationCache.TotalCompilations")  # the op's own NEFF, cached


def test_never_in_deterministic_mode(counted):
    x = torch.randn(8, device=DEV)
    torch.use_deterministic_algorithms(True)
    try:
        with adaptive_eager.mode(True):
            before = adaptive_eager.stats()
            chain(x).cpu()
            d = delta(before, adaptive_eager.stats())
    finally:
        torch.use_deterministic_algorithms(False)
    assert d["ops"] == 0 and d["fused_launches"] == 0


def test_longest_fused_launch(counted):
    was = adaptive_eager.max_ops()
    adaptive_eager.set_max_ops(3)
    try:
        with adaptive_eager.mode(True):
            before = adaptive_eager.stats()
            x = torch.randn(8, device=DEV)
            for _ in range(7):
                x = x + 1
            x.cpu()
            d = delta(before, adaptive_eager.stats())
    finally:
        adaptive_eager.set_max_ops(was)
    assert d["launches"] == 3 and d["flushes"]["limit"] == 2
    with pytest.raises(ValueError, match="at least 1 op"):
        adaptive_eager.set_max_ops(0)


def test_timeline_shows_one_launch_per_run(counted):
    x = torch.randn(256, device=DEV)
    chain(x).cpu()  # compile the ops' signatures first
    for on in (False, True):
        with adaptive_eager.mode(on):
            chain(x).cpu()  # the fused run's compilation, outside the timeline
            with profiler.timeline() as t:
                chain(x).cpu()
        kernels = [e for e in t.events if e["kind"] == "kernel"]
        assert len(kernels) == 4  # op tracking and the device's events stay per op
        continuing = [e for e in kernels if e["continues_launch"]]
        if on:
            assert len(continuing) == 3 and all(e["launch_seconds"] == 0 for e in continuing)
            assert t.summary["launches"] == 1
        else:
            assert not continuing and t.summary["launches"] == 4
        assert t.summary["fused_launches"] == 1  # what adaptive eager makes (would make) of them
    with adaptive_eager.mode(True), profiler.timeline() as t:
        ((x + 2) * 3).cpu()  # a new run: its compilation is on the timeline
    assert [e["name"] for e in t.events if e["kind"] == "compile"] == ["compile fused launch"]


def test_compare_adaptive_eager_on_a_training_step(counted):
    torch.manual_seed(0)
    model = mlp().to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 20, device=DEV), torch.randint(0, 5, (16,), device=DEV)

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    cmp = torch_neuron_sim.compare_adaptive_eager(step)
    rows = {(r["profile"], r["adaptive_eager"]): r for r in cmp.rows}
    for chip in ("trn2", "trn3"):
        off, on = rows[(chip, False)], rows[(chip, True)]
        assert on["launches"] < off["launches"]
        assert 0 < on["first_step_compilations"] < off["first_step_compilations"]
        assert on["step_seconds"] < off["step_seconds"] and on["launch_seconds"] < off["launch_seconds"]
    assert rows[("trn3", True)]["step_seconds"] <= rows[("trn2", True)]["step_seconds"]
    assert "ESTIMATE" in str(cmp) and "adaptive eager" in str(cmp)
    est = torch_neuron_sim.estimate(step)
    assert est.adaptive_launches < est.launches and est.adaptive_launch_seconds_saved > 0
    assert est.to_dict()["adaptive_eager"]["launches"] == est.adaptive_launches


def test_switch_from_the_environment():
    r = run_python("""
        import torch, torch_neuron_sim
        from torch_neuron_sim import adaptive_eager, metrics
        assert adaptive_eager.enabled()
        metrics.set_enabled(True)
        x = torch.randn(8, device="neuron")
        ((x + 1) * 2).cpu()
        print(metrics.get_counter_value("AdaptiveEager.Launches"), metrics.get_counter_value("AdaptiveEager.FusedOps"))
    """, env={"TORCH_NEURONX_ENABLE_CONCATENATION": "1"}, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "2"]
    r = run_python("import torch_neuron_sim as t; print(t.adaptive_eager.enabled())", timeout=300)
    assert r.stdout.strip() == "False"  # off by default
