"""Debug modes that make memory misuse visible, and injected OOMs.
Poisoning and guard bytes can be switched in-process (what the environment
variables do at start-up); page protection is start-up only, so those tests
run in a fresh interpreter."""
import ctypes

import pytest
import torch

import torch_neuron_sim
from torch_neuron_sim import _C
from conftest import run_python

DEV = 1


@pytest.fixture
def mode(request):
    """Switches a debug mode on for one test."""
    name = request.param
    was_on = _C._debug_modes()[name]
    _C._set_debug_mode(name, True)
    yield name
    _C._set_debug_mode(name, was_on)


@pytest.mark.parametrize("mode", ["poison"], indirect=True)
def test_poison_makes_uninitialised_and_freed_memory_visible(mode):
    x = torch.empty(64, device=f"neuron:{DEV}")
    assert torch.isnan(x).all().item()  # uninitialised floats are NaN ...
    assert torch.isnan(x.sum()).item()  # ... and poison every result they reach
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        assert torch.isnan(torch.empty(8, dtype=dtype, device=f"neuron:{DEV}")).all().item()
    assert (torch.empty(8, dtype=torch.int32, device=f"neuron:{DEV}") == -1).all().item()
    y = torch.ones(64, device=f"neuron:{DEV}")
    stale = y.data_ptr()
    del y
    with _C._HostAccess():  # reading arena bytes on purpose, even under NEURON_SIM_PROTECT
        assert ctypes.string_at(stale, 256) == b"\xff" * 256  # what a dangling pointer would read
    assert torch.zeros(4, device=f"neuron:{DEV}").sum().item() == 0  # initialised memory is unaffected


def poke(address, value, nbytes):  # a stray host write, allowed even under NEURON_SIM_PROTECT
    with _C._HostAccess():
        ctypes.memset(address, value, nbytes)


def write_past_end(t, nbytes, value=0):
    poke(t.data_ptr() + t.numel() * t.element_size(), value, nbytes)


def make_buffer():  # the allocation site a guard report must name
    return torch.ones(10, device=f"neuron:{DEV}")


@pytest.mark.parametrize("mode", ["guard"], indirect=True)
def test_guard_bytes_report_size_and_allocation_site(mode):
    before = torch.neuron.memory_stats(DEV)
    x = make_buffer()
    after = torch.neuron.memory_stats(DEV)
    assert after["active_bytes.all.current"] == before["active_bytes.all.current"] + 40  # guards are not active
    # ... but are part of the block: 512 B either side, rounded to a size class
    assert after["allocated_bytes.all.current"] - before["allocated_bytes.all.current"] >= 40 + 1024
    torch_neuron_sim.memory.check_guards()  # intact
    write_past_end(x, 3)
    with pytest.raises(RuntimeError) as info:
        torch_neuron_sim.memory.check_guards()
    msg = str(info.value)
    assert "block of 40 bytes" in msg and "offset 40, byte 1 past the end" in msg
    assert "in make_buffer" in msg and "test_memory_debug.py" in msg
    write_past_end(x, 3, 0xFD)  # repair, so freeing it does not abort this process
    torch_neuron_sim.memory.check_guards()
    poke(x.data_ptr() - 1, 7, 1)
    with pytest.raises(RuntimeError, match="byte 1 before the start"):
        torch_neuron_sim.memory.check_guards()
    poke(x.data_ptr() - 1, 0xFD, 1)
    del x
    assert torch.neuron.memory_allocated(DEV) == before["allocated_bytes.all.current"]


def test_guard_damage_found_on_free_aborts_with_a_report():
    r = run_python("""
        import ctypes, torch, torch_neuron_sim
        def load_batch():
            return torch.zeros(256, device="neuron")
        x = load_batch()
        ctypes.memset(x.data_ptr() + 1024, 1, 8)   # a kernel writing 8 bytes past the end
        del x
        print("not reached")
    """, {"NEURON_SIM_GUARD": "1", "NEURON_SIM_PROTECT": "0"})  # the stray write itself must not fault
    assert r.returncode != 0 and "not reached" not in r.stdout
    assert "guard bytes of a block on neuron:0 were overwritten" in r.stderr
    assert "1024 bytes" in r.stderr and "byte 1 past the end" in r.stderr
    assert 'line 4, in load_batch' in r.stderr


def test_protect_faults_on_host_access_and_kernels_still_run():
    r = run_python("""
        import ctypes, threading, torch, torch_neuron_sim
        assert torch.neuron.memory.debug_modes()["protect"]
        x = torch.arange(6, dtype=torch.float32, device="neuron").reshape(2, 3)
        y = (x * 2 + 1).t().contiguous()
        y.resize_(7)                         # storage growth copies on the host
        z = torch.ones(3, device="neuron:1").to("neuron:0")
        def work():
            for _ in range(200):
                a = torch.randn(64, device="neuron") @ torch.randn(64, 2, device="neuron")
                assert a.cpu().isfinite().all()
        ts = [threading.Thread(target=work) for _ in range(2)]
        [t.start() for t in ts]; [t.join() for t in ts]
        print("kernels ok", x.sum().item(), y[:6].tolist(), z.tolist(), str(x).count("tensor"), flush=True)
        ctypes.string_at(x.data_ptr(), 4)   # host code reading device memory
        print("not reached")
    """, {"NEURON_SIM_PROTECT": "1", "PYTHONFAULTHANDLER": "1"})
    assert "kernels ok 15.0 [1.0, 7.0, 3.0, 9.0, 5.0, 11.0] [1.0, 1.0, 1.0] 1" in r.stdout, r.stderr
    assert "not reached" not in r.stdout and r.returncode != 0
    assert "Segmentation fault" in r.stderr and 'File "<string>", line 15 in <module>' in r.stderr  # the faulting line


def test_fail_alloc_at_env_fails_the_nth_allocation_once():
    r = run_python("""
        import torch, torch_neuron_sim
        kept = [torch.empty(4, device="neuron"), torch.empty(4, device="neuron")]
        try:
            torch.empty(4, device="neuron")
        except torch.OutOfMemoryError as e:
            print("third failed:", "injected" in str(e), "NRT allocation failed" in str(e))
        kept.append(torch.empty(4, device="neuron"))
        print("ooms", torch.neuron.memory_stats()["num_ooms"], len(kept))
    """, {"NEURON_SIM_FAIL_ALLOC_AT": "3"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["third failed: True True", "ooms 1 3"]


def test_inject_oom_context_manager_and_backoff():
    before = torch.neuron.memory_stats(DEV)
    ooms = before["num_ooms"]
    with torch_neuron_sim.inject_oom(after=2) as armed:
        a = torch.empty(8, device=f"neuron:{DEV}")
        b = torch.empty(8, device=f"neuron:{DEV}")
        assert armed.pending
        with pytest.raises(torch.OutOfMemoryError, match="injected"):
            torch.empty(8, device=f"neuron:{DEV}")
        assert not armed.pending
        c = torch.empty(8, device=f"neuron:{DEV}")  # fires once only
    after = torch.neuron.memory_stats(DEV)
    assert after["num_ooms"] == ooms + 1
    assert after["allocation_requests"] == before["allocation_requests"] + 4  # the failed one counts too
    with torch_neuron_sim.inject_oom(after=100) as armed:
        pass
    assert not armed.pending  # leaving the block disarms it
    torch.empty(8, device=f"neuron:{DEV}")
    del a, b, c

    def train_step(batch):  # user code under test: halve the batch on OOM
        return (torch.ones(batch, 16, device=f"neuron:{DEV}") * 2).sum().item()

    torch_neuron_sim.inject_oom(after=0)  # plain call: the next allocation fails
    batch, result = 64, None
    while result is None:
        try:
            result = train_step(batch)
        except torch.OutOfMemoryError:
            batch //= 2
    assert (batch, result) == (32, 32 * 16 * 2)
