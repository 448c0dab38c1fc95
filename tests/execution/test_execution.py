"""Factories, copies, views, .item(), printing, and the two execution paths:
native ops run on arena memory with no copies; every other op takes the
tracked CPU fallback."""
import logging

import pytest
import torch

import torch_neuron_sim
from conftest import run_python


def arena_range(device=0):
    base = torch_neuron_sim._C._arena_base(device)
    return base, base + torch.neuron.get_device_properties(device).total_memory


def in_arena(t):
    lo, hi = arena_range(t.device.index)
    return lo <= t.data_ptr() < hi


# ---- factories -------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64,
                                   torch.int8, torch.uint8, torch.bool, torch.float64])
def test_factories(dtype):
    for make, total in ((lambda: torch.zeros(3, 4, dtype=dtype, device="neuron"), 0),
                        (lambda: torch.ones(3, 4, dtype=dtype, device="neuron"), 12),
                        (lambda: torch.full((3, 4), 1, dtype=dtype, device="neuron"), 12),
                        (lambda: torch.empty(3, 4, dtype=dtype, device="neuron").fill_(1), 12)):
        t = make()
        assert t.device == torch.device("neuron:0") and t.dtype == dtype and in_arena(t)
        assert t.cpu().to(torch.float32).sum().item() == total
    assert torch.arange(5, device="neuron").cpu().tolist() == [0, 1, 2, 3, 4]
    assert torch.eye(2, device="neuron").cpu().tolist() == [[1, 0], [0, 1]]
    e = torch.empty_strided((2, 3), (1, 2), device="neuron")
    assert e.stride() == (1, 2) and in_arena(e)


def test_empty_on_other_device_allocates_there():
    t = torch.empty(10, device="neuron:2")
    assert t.device.index == 2 and in_arena(t)
    assert torch.neuron.memory_allocated(2) >= 40


# ---- copies ----------------------------------------------------------------

def test_host_device_round_trip_and_dtype_conversion():
    x = torch.randn(5, 7)
    n = x.to("neuron")
    assert torch.equal(n.cpu(), x)
    assert torch.equal(x.to("neuron", torch.bfloat16).cpu(), x.to(torch.bfloat16))
    assert torch.equal(n.to(torch.float16).cpu(), x.to(torch.float16))
    assert torch.equal(n.to(torch.int32).cpu(), x.to(torch.int32))
    # non-contiguous sources and destinations
    assert torch.equal(x.t().to("neuron").cpu(), x.t())
    assert torch.equal(n.t().cpu(), x.t())
    dst = torch.zeros(7, 5, device="neuron")
    dst.copy_(x.t())
    assert torch.equal(dst.cpu(), x.t().contiguous())
    # broadcasting copy
    dst = torch.zeros(3, 7, device="neuron")
    dst.copy_(torch.arange(7.0))
    assert torch.equal(dst.cpu(), torch.arange(7.0).expand(3, 7))


def test_non_blocking_copies():
    x = torch.randn(1000)
    n = x.to("neuron", non_blocking=True)
    back = n.to("cpu", non_blocking=True)
    torch.neuron.synchronize()
    assert torch.equal(back, x)


def test_copies_across_devices():
    x = torch.randn(64, 64)
    a = x.to("neuron:0")
    b = a.to("neuron:1")
    assert b.device.index == 1 and in_arena(b) and torch.equal(b.cpu(), x)
    c = torch.empty(64, 64, device="neuron:3")
    c.copy_(b)
    assert torch.equal(c.cpu(), x)
    assert torch.equal((b + b.to("neuron:1")).cpu(), 2 * x)


# ---- views, storage and in-place ----------------------------------------------

def test_views_alias_storage():
    n = torch.arange(12.0, device="neuron")
    v = n.view(3, 4)
    v[1, 2] = 100
    assert n[6].item() == 100
    s = n.as_strided((2, 2), (1, 3), 1)
    s.mul_(0)
    assert n.cpu()[[1, 2, 4, 5]].tolist() == [0, 0, 0, 0]
    r = n.reshape(4, 3).t()  # _reshape_alias + transpose
    assert r.data_ptr() == n.data_ptr()
    r.fill_(7)
    assert (n.cpu() == 7).all()
    u = n.unfold(0, 4, 4)
    assert u.shape == (3, 4) and u.data_ptr() == n.data_ptr()


def test_inplace_op_on_view_writes_through():
    base = torch.zeros(4, 4, device="neuron")
    base[:, 1].add_(torch.ones(4, device="neuron"))  # native in-place on a strided view
    assert base.cpu()[:, 1].tolist() == [1, 1, 1, 1] and base.sum().item() == 4
    base[2].clamp_(min=5)  # clamp_ falls back: the result must still land in the view
    assert base.cpu()[2].tolist() == [5, 5, 5, 5]


def test_set_and_resize():
    a = torch.arange(6.0, device="neuron")
    b = torch.empty(0, device="neuron")
    b.set_(a)
    assert b.data_ptr() == a.data_ptr() and torch.equal(b.cpu(), a.cpu())
    c = torch.empty(0, device="neuron")
    c.set_(a.untyped_storage(), 2, (2, 2), (2, 1))
    assert c.cpu().tolist() == [[2, 3], [4, 5]]
    a.resize_(2, 3)
    assert a.shape == (2, 3) and a.cpu().flatten().tolist() == [0, 1, 2, 3, 4, 5]
    a.resize_(4, 4)  # growing keeps the old bytes
    assert a.cpu().flatten()[:6].tolist() == [0, 1, 2, 3, 4, 5] and in_arena(a)
    d = torch.empty(0, device="neuron")
    d.set_()
    assert d.numel() == 0


def test_out_variant_resizes_destination_in_the_arena():
    out = torch.empty(0, device="neuron")
    x = torch.randn(8).to("neuron")
    torch.add(x, 1, out=out)  # add.out is native: the kernel grows `out` inside the arena
    assert out.shape == (8,) and in_arena(out)
    assert torch.allclose(out.cpu(), x.cpu() + 1)


def test_item_and_printing():
    assert torch.tensor(3.5, device="neuron").item() == 3.5
    assert torch.tensor([7], dtype=torch.int64, device="neuron").item() == 7
    assert torch.tensor(True, device="neuron").item() is True
    text = repr(torch.tensor([1.0, 2.0], device="neuron:1"))
    assert "device='neuron:1'" in text and "1., 2." in text


# ---- the two paths -----------------------------------------------------------

def test_native_op_runs_on_arena_without_copies(tracked):
    from torch_neuron_sim.testing import count_cpu_bounce_calls

    a = torch.randn(256).to("neuron")
    b = torch.randn(256).to("neuron")
    before = torch.neuron.memory_stats()["allocation_requests"]
    out = []
    assert count_cpu_bounce_calls(lambda: out.append(a + b)) == 0  # no host copy in or out
    c = out[0]
    # one allocation: the output, made by the CPU kernel inside the arena
    assert torch.neuron.memory_stats()["allocation_requests"] == before + 1
    assert in_arena(c) and c.device.type == "neuron"
    assert torch.equal(c.cpu(), a.cpu() + b.cpu())
    assert "aten::add.Tensor" in tracked.get_executed_ops()  # the overload that ran, as the device records it
    assert tracked.get_op_counts()["aten::add.Tensor"] == {"executed": 1, "fallback": 0}
    assert tracked.get_fallback_ops() == []


def test_fallback_op_is_tracked_and_correct(tracked):
    from torch_neuron_sim.testing import count_cpu_bounce_calls

    x = torch.randn(5, 6)
    n = x.to("neuron")
    out = []
    # not in the native set: the input goes to the host, the result comes back
    assert count_cpu_bounce_calls(lambda: out.append(torch.trace(n))) == 2
    tr = out[0]
    assert tr.device.type == "neuron" and in_arena(tr)
    assert torch.allclose(tr.cpu(), torch.trace(x))
    assert tracked.get_fallback_ops() == ["aten::trace"]
    torch.trace(n)
    assert tracked.get_op_counts()["aten::trace"]["fallback"] == 2
    vals, idx = torch.kthvalue(n, 2, dim=1)  # two outputs
    ref_vals, ref_idx = torch.kthvalue(x, 2, dim=1)
    assert torch.equal(vals.cpu(), ref_vals) and torch.equal(idx.cpu(), ref_idx)
    tracked.clear_op_tracking()
    assert tracked.get_fallback_ops() == [] and tracked.get_executed_ops() == []


def test_fallback_in_place_and_out(tracked):
    n = torch.randn(4, 4).to("neuron")
    ref = n.cpu()
    n.cumprod_(0)
    assert torch.allclose(n.cpu(), ref.cumprod(0))
    out = torch.empty(0, device="neuron")
    torch.cumprod(n, 1, out=out)
    assert torch.allclose(out.cpu(), ref.cumprod(0).cumprod(1))
    assert any(name.startswith("aten::cumprod") for name in tracked.get_fallback_ops())


def test_fallback_warns_once_through_logging():
    # A fresh interpreter: the warning is once per op per process.
    r = run_python("""
        import logging, torch, torch_neuron_sim
        seen = []
        class Keep(logging.Handler):
            def emit(self, record):
                seen.append(record.getMessage())
        logging.getLogger("torch_neuron_sim").addHandler(Keep())
        x = torch.randn(3, 3).to("neuron")
        torch.logcumsumexp(x, 0)
        torch.logcumsumexp(x, 1)
        print(len([m for m in seen if "logcumsumexp" in m and "fell back to CPU" in m]))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1"]


def test_fallback_warning_can_be_silenced():
    r = run_python("""
        import logging, torch, torch_neuron_sim
        logging.getLogger("torch_neuron_sim").setLevel(logging.ERROR)
        torch.trace(torch.ones(3, 3, device="neuron"))
        print(torch_neuron_sim.get_fallback_ops())
    """)
    assert r.returncode == 0, r.stderr
    assert "fell back" not in r.stderr and "aten::trace" in r.stdout


def test_fallback_error_mode_names_the_op_and_leaves_process_usable():
    r = run_python("""
        import torch, torch_neuron_sim
        x = torch.ones(3, device="neuron")
        try:
            torch.trace(x.view(3, 1))
        except RuntimeError as e:
            print("raised:", "aten::trace" in str(e), "NEURON_SIM_FALLBACK" in str(e))
        print((x + x).sum().item())
    """, {"NEURON_SIM_FALLBACK": "error"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["raised:", "True", "True", "6.0"]


def test_the_fallback_warning_and_error_say_why_the_call_left_the_device():
    """A native op falls back for a call its kernel does not take; the one-time
    warning and the error mode's message give that reason, not "not in the
    native-op set", which only an op outside the set gets."""
    code = """
        import logging, torch, torch_neuron_sim
        seen = []
        class Keep(logging.Handler):
            def emit(self, record):
                seen.append(record.getMessage())
        logging.getLogger("torch_neuron_sim").addHandler(Keep())
        x = torch.zeros(4, 4, device="neuron")
        calls = {"strided fill_": lambda: x[:, 1].fill_(3.0),
                 "complex add": lambda: torch.ones(2, dtype=torch.complex64, device="neuron") + 1,
                 "trace": lambda: torch.trace(x)}
        for name, call in calls.items():
            try:
                call()
                print(name, "|", [m.split(": ", 1)[1] for m in seen if "fell back to CPU" in m][-1])
            except RuntimeError as e:
                print(name, "|", str(e).split(" (", 1)[1].split(")", 1)[0])
        print(x[:, 1].tolist())  # written by the fallback; untouched when it is refused
    """
    warned = run_python(code)
    assert warned.returncode == 0, warned.stderr
    lines = warned.stdout.splitlines()
    assert lines[0] == ("strided fill_ | the device's kernel does not write in place to a non-contiguous tensor, "
                        "so its inputs were copied to the host and back. "
                        "torch_neuron_sim.get_fallback_ops() lists every such op.")
    assert lines[1].startswith("complex add | the device computes in no complex dtype, so")
    assert lines[2].startswith("trace | it is not in the native-op set, so")
    assert lines[3] == "[3.0, 3.0, 3.0, 3.0]"
    refused = run_python(code, {"NEURON_SIM_FALLBACK": "error"})
    assert refused.returncode == 0, refused.stderr
    assert refused.stdout.splitlines() == [
        "strided fill_ | the device's kernel does not write in place to a non-contiguous tensor",
        "complex add | the device computes in no complex dtype",
        "trace | it is not in the native-op set",
        "[0.0, 0.0, 0.0, 0.0]"]


def test_native_set_is_table_driven():
    # A fresh interpreter: extending the set registers kernels for the rest
    # of the process.
    r = run_python("""
        import torch, torch_neuron_sim as tns
        x = torch.randn(4).to("neuron")
        torch.cumprod(x, 0)
        print("aten::cumprod" in tns.get_fallback_ops())  # the functional name (structured op)
        tns.native_ops.extend(["aten::cumprod"])
        tns.clear_op_tracking()
        y = torch.cumprod(x, 0)
        print("aten::cumprod" in tns.get_executed_ops(), tns.get_fallback_ops() == [],
              torch.allclose(y.cpu(), x.cpu().cumprod(0)), tns.native_ops.version())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True", "True", "True", "torchneuron-2.14-beta+custom"]


def _routing(op):
    from torch_neuron_sim.testing import track_neuron_ops

    x = torch.randn(8).to("neuron")
    lo, hi = torch.full((8,), -0.5).to("neuron"), torch.full((8,), 0.5).to("neuron")
    with track_neuron_ops() as ops:
        if op == "clamp_":
            x.clone().clamp_(lo, hi)  # tensor bounds
        else:
            torch.kron(x, x)
    return sorted(set(ops.executed)), sorted(set(ops.fallback))


@pytest.mark.parametrize("context", ["override([])", 'execution_path("fallback")', 'execution_path("native")'])
def test_leaving_a_changed_native_set_restores_the_routing_of_every_op(context):
    # The block registers device kernels for ops its table needs them for
    # (clamp_.Tensor with no native clamp, kron made native); leaving it takes
    # them away: clamp_ is again the composite reaching the native
    # clamp.Tensor_out, kron again decomposes, as before the block.
    from torch_neuron_sim.testing import execution_path

    blocks = {"override([])": lambda: torch_neuron_sim.native_ops.override([]),
              'execution_path("fallback")': lambda: execution_path("fallback"),
              'execution_path("native")': lambda: execution_path("native", ["aten::kron"])}
    kernels = lambda: sorted(torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1"))  # noqa: E731
    table, registered = torch_neuron_sim.native_ops.current(), kernels()
    before = {op: _routing(op) for op in ("clamp_", "kron")}
    assert before == {"clamp_": (["aten::clamp.Tensor_out", "aten::clone", "aten::empty"], []),
                      "kron": (["aten::mul.Tensor"], [])}
    with blocks[context]():
        inside = {op: _routing(op) for op in ("clamp_", "kron")}
    if context == 'execution_path("native")':
        assert inside["kron"] == (["aten::kron"], [])
    else:
        assert inside["clamp_"][1] == ["aten::clamp_.Tensor"]
    assert {op: _routing(op) for op in ("clamp_", "kron")} == before
    assert kernels() == registered
    assert torch_neuron_sim.native_ops.current() == table


def test_views_are_never_tracked(tracked):
    x = torch.randn(4, 4).to("neuron")
    x.t().reshape(16).unsqueeze(0).squeeze(0).expand(2, 16).narrow(1, 0, 4)
    assert tracked.get_fallback_ops() == []


def test_native_op_that_raises_is_neither_executed_nor_compiled(tracked):
    from torch_neuron_sim import compile_cache

    a, b = torch.ones(3, device="neuron"), torch.ones(4, device="neuron")
    before = compile_cache.op_signatures().get("aten::add.Tensor", {"compilations": 0})["compilations"]
    with pytest.raises(RuntimeError, match="size of tensor a"):
        a + b  # native, and the CPU kernel refuses the shapes
    assert tracked.get_op_counts().get("aten::add.Tensor", {"executed": 0})["executed"] == 0
    assert compile_cache.op_signatures().get("aten::add.Tensor", {"compilations": 0})["compilations"] == before
    assert (a + a).sum().item() == 6  # the process is usable, and a good call counts
    assert tracked.get_op_counts()["aten::add.Tensor"]["executed"] == 1


def test_device_check_on_a_fast_path_op_runs_on_the_common_call(tracked):
    """mm on float32 neuron tensors is the fast path's common call; once the
    op has a device check, every call runs it (the op leaves the fast path),
    and without it the fast path serves mm again."""
    from torch_neuron_sim import _C

    a = torch.randn(8, 8).to("neuron")
    expected = a.cpu() @ a.cpu()
    _C._set_refusing_check("aten::mm", "mm refused by the device's check")
    try:
        with pytest.raises(ValueError, match="mm refused by the device's check"):
            torch.mm(a, a)  # float32: the fast path's dtype
        with pytest.raises(ValueError, match="mm refused by the device's check"):
            torch.mm(a.double(), a.double())  # float64: the 64-bit rule's (boxed) path
    finally:
        _C._set_refusing_check("aten::mm", None)
    assert tracked.get_op_counts().get("aten::mm", {"executed": 0})["executed"] == 0  # refused calls never ran
    torch.testing.assert_close(torch.mm(a, a).cpu(), expected)
    assert tracked.get_op_counts()["aten::mm"]["executed"] == 1
    # Removing the test's check puts back mm's own: the device's shape message.
    with pytest.raises(RuntimeError, match=r"^a and b must have same reduction dim, but got \[8, 8\] X \[4, 8\]"):
        torch.mm(a, torch.randn(4, 8).to("neuron"))


def test_loading_another_table_takes_away_the_kernels_only_the_old_one_needed(tmp_path):
    # load()/extend() replace the native set: a device kernel registered for
    # the old set alone (clamp_.Tensor, while clamp is not native) must not
    # keep rerouting the op once a table with a native clamp is loaded again.
    ns = torch_neuron_sim.native_ops
    kernels = lambda: sorted(torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1"))  # noqa: E731
    table, registered = ns.current(), kernels()
    before = _routing("clamp_")
    try:
        without_clamp = tmp_path / "without-clamp.txt"
        without_clamp.write_text("\n".join(n for n in table if not n.startswith("aten::clamp")))
        ns.load(without_clamp)
        assert _routing("clamp_")[1] == ["aten::clamp_.Tensor"]
        ns.extend(["aten::kron"])
        assert _routing("kron") == (["aten::kron"], [])
    finally:
        ns.load()
    assert _routing("clamp_") == before
    assert _routing("kron") == (["aten::mul.Tensor"], [])
    assert kernels() == registered
    assert ns.current() == table


def test_consecutive_native_ops_see_each_call_s_own_inputs():
    """A run of native ops whose inputs change dtype, shape, strides, offset
    and count from one call to the next: each call computes on its own
    inputs, as on the CPU (the host views of one call's inputs are reused by
    the next)."""
    torch.manual_seed(0)
    base = torch.randn(6, 8)
    calls = [
        (torch.add, (torch.randn(8), torch.randn(8))),
        (torch.mul, (torch.randint(-5, 5, (4, 3), dtype=torch.int32), torch.randint(-5, 5, (4, 3), dtype=torch.int32))),
        (torch.sub, (base[1:4, 2:7], base.t()[3:8, :3].t())),  # offsets and strides
        (torch.add, (base.permute(1, 0), torch.randn(6))),
        (lambda a, b: a - torch._neg_view(b), (torch.randn(5), torch.randn(5))),  # a negative view
        (torch.add, (torch.randn(5), torch.randn(5))),
        (lambda a, b: torch.addmm(a, b, b.t()), (torch.randn(3, 3), torch.randn(3, 7))),  # three inputs
        (lambda a: a.sum(dim=0), (torch.randn(4, 2, dtype=torch.bfloat16),)),
        (torch.mul, (torch.randn(2, 3), torch.randn(2, 3))),
    ]
    for _ in range(2):
        for op, args in calls:
            expected = op(*args)
            got = op(*[a.to("neuron") for a in args])
            assert got.device.type == "neuron" and got.dtype == expected.dtype
            torch.testing.assert_close(got.cpu(), expected)


def test_an_op_the_rules_never_record_is_counted_alike_on_every_path(tracked, tmp_path):
    """The bookkeeping after a kernel is one function on every path: add.Tensor, marked
    `never` in the tracking rules, is counted by none of the fast path (float32), the fast
    path while device events are recorded, and the boxed path (float64, the 64-bit rule);
    with the rules back, each of the three counts once."""
    ns = torch_neuron_sim.native_ops
    rules = tmp_path / "never-add.rules"
    rules.write_text(ns.RULES.read_text() + "\nnever aten::add.Tensor\n")
    a32 = torch.ones(4, device="neuron")
    a64 = torch.ones(4, dtype=torch.float64, device="neuron")

    def three_calls():
        assert (a32 + a32).cpu().tolist() == [2.0] * 4  # fast path, nothing observing
        with torch_neuron_sim.profiler.timeline():
            a32 + a32  # fast path, its device event recorded
        assert (a64 + a64).cpu().tolist() == [2.0] * 4  # boxed path

    ns._apply_rules(rules)
    try:
        tracked.clear_op_tracking()
        three_calls()
        assert tracked.get_op_counts().get("aten::add.Tensor", {"executed": 0})["executed"] == 0
    finally:
        ns._apply_rules()
    tracked.clear_op_tracking()
    three_calls()
    assert tracked.get_op_counts()["aten::add.Tensor"]["executed"] == 3
