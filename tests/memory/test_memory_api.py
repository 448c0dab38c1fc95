"""The memory API of the real backend (its `neuron.py` and `memory.py`) on torch.neuron and
through torch.accelerator, plus mem_get_info and the per-process fraction."""
import pytest
import torch

import torch_neuron_sim
from torch_neuron_sim import _C
from conftest import run_python

KEYS = {"num_alloc_retries", "num_ooms", "num_tensor_frees", "allocation_requests", "num_device_alloc",
        "num_device_free", "largest_free_block"}
POOLED = ("allocated_bytes", "reserved_bytes", "active_bytes", "requested_bytes", "inactive_split_bytes",
          "allocation", "segment", "active", "inactive_split")
DEV = 2  # a device other tests use little


pytestmark = pytest.mark.usefixtures("plain_arena")  # the normal block layout: see conftest


def test_torch_neuron_memory_is_the_memory_module():
    """torch.neuron's memory functions (the real backend's names) are the
    memory module's, the ones the tests below check by what they return;
    torch_neuronx has the same ones: one set of numbers everywhere."""
    from torch_neuron_sim import torch_neuronx

    assert torch.neuron.memory is torch_neuron_sim.memory
    for name in ("memory_allocated", "max_memory_allocated", "reset_peak_memory_stats",
                 "reset_accumulated_memory_stats", "memory_summary", "empty_cache", "mem_get_info",
                 "set_per_process_memory_fraction", "memory_stats", "memory_reserved", "max_memory_reserved"):
        assert getattr(torch.neuron, name) is getattr(torch_neuron_sim.memory, name), name
    for name in ("memory_allocated", "memory_stats", "memory_reserved", "max_memory_reserved", "empty_cache"):
        assert getattr(torch_neuronx, name) is getattr(torch_neuron_sim.memory, name), name


def test_memory_stats_keys_and_accounting():
    # torch.cuda's flat keys, per pool; the 1000 B request takes a 1024 B size class
    torch.neuron.empty_cache()
    s = torch_neuron_sim.memory_stats(DEV)
    expected = KEYS | {"num_sync_all_streams", "max_split_size"} | {
        f"{k}.{pool}.{field}" for k in POOLED + ("oversize_allocations", "oversize_segments")
        for pool in ("all", "small_pool", "large_pool") for field in ("current", "peak", "allocated", "freed")
        if not k.startswith("oversize") or pool == "all"}
    assert {k.replace("oversize_allocations.", "oversize_allocations.all.")
             .replace("oversize_segments.", "oversize_segments.all.") for k in s} >= KEYS
    assert list(s) == sorted(s)
    for k in POOLED:
        assert f"{k}.small_pool.current" in s and f"{k}.large_pool.peak" in s
    del expected
    before = s
    x = torch.empty(1000, dtype=torch.uint8, device=f"neuron:{DEV}")
    s = torch_neuron_sim.memory_stats(DEV)
    assert s["allocated_bytes.all.current"] == before["allocated_bytes.all.current"] + 1024  # its size class
    assert s["active_bytes.all.current"] == before["active_bytes.all.current"] + 1000  # exact bytes
    assert s["requested_bytes.small_pool.current"] == s["active_bytes.small_pool.current"]
    assert s["allocated_bytes.all.allocated"] == before["allocated_bytes.all.allocated"] + 1024
    assert s["allocation_requests"] == before["allocation_requests"] + 1
    assert s["reserved_bytes.all.current"] >= s["allocated_bytes.all.current"] >= s["active_bytes.all.current"]
    del x
    s2 = torch.neuron.memory_stats(DEV)
    assert s2["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
    assert s2["allocated_bytes.all.freed"] == before["allocated_bytes.all.freed"] + 1024
    assert s2["num_tensor_frees"] == before["num_tensor_frees"] + 1
    assert s2["reserved_bytes.all.current"] == s["reserved_bytes.all.current"]  # the block stays cached
    nested = torch.neuron.memory.memory_stats_as_nested_dict(DEV)
    assert nested["reserved_bytes"]["all"]["current"] == s2["reserved_bytes.all.current"]


def test_peaks_and_resets():
    torch.neuron.reset_peak_memory_stats(DEV)
    base = torch.neuron.memory_allocated(DEV)
    assert torch.neuron.max_memory_allocated(DEV) == base
    x = torch.empty(1 << 20, dtype=torch.uint8, device=f"neuron:{DEV}")
    del x
    assert torch.neuron.memory_allocated(DEV) == base
    assert torch.neuron.max_memory_allocated(DEV) == base + (1 << 20)
    assert torch_neuron_sim.max_memory_reserved(DEV) >= base + (1 << 20)
    torch.neuron.reset_peak_memory_stats(DEV)
    assert torch.neuron.max_memory_allocated(DEV) == base
    torch.neuron.reset_accumulated_memory_stats(DEV)
    s = torch.neuron.memory_stats(DEV)
    assert s["allocation_requests"] == s["num_tensor_frees"] == s["num_ooms"] == 0
    assert s["allocated_bytes.all.allocated"] == s["allocated_bytes.all.freed"] == 0
    assert s["allocated_bytes.all.current"] == base  # current is not accumulated


def test_accelerator_reads_the_same_numbers():
    x = torch.empty(4096, dtype=torch.uint8, device=f"neuron:{DEV}")
    assert torch.accelerator.memory_allocated(DEV) == torch.neuron.memory_allocated(DEV)
    assert torch.accelerator.memory_reserved(DEV) == torch.neuron.memory_reserved(DEV)
    acc, mine = torch.accelerator.memory_stats(DEV), torch.neuron.memory_stats(DEV)
    for key in ("num_ooms", "reserved_bytes.small_pool.current", "allocated_bytes.large_pool.peak",
                "active_bytes.all.current", "segment.all.current", "inactive_split_bytes.all.current"):
        assert acc[key] == mine[key], key
    assert torch.accelerator.get_memory_info(DEV) == torch.neuron.mem_get_info(DEV)
    del x


def test_mem_get_info_and_summary():
    free, total = torch.neuron.mem_get_info(DEV)
    assert total == 24 * 2**30 and free == total - torch_neuron_sim.memory_reserved(DEV)
    text = torch.neuron.memory_summary(DEV)
    assert f"Neuron Memory Summary, Device {DEV}" in text
    for row in ("Allocated memory", "Reserved memory", "Active memory", "Non-releasable memory", "Allocations",
                "Reserved segments", "from large pool", "from small pool", "OOMs", "Retries", "Largest free block"):
        assert row in text
    short = torch.neuron.memory_summary(DEV, abbreviated=True)  # all pools only, as torch.cuda's
    assert "Reserved memory" in short and "from small pool" not in short


def test_empty_cache_returns_free_pages_and_keeps_live_data():
    x = torch.full((1 << 18,), 3.0, device=f"neuron:{DEV}")
    y = torch.ones(1 << 18, device=f"neuron:{DEV}")
    del y
    torch.neuron.empty_cache()
    assert x.sum().item() == 3.0 * (1 << 18)
    z = torch.zeros(1 << 18, device=f"neuron:{DEV}")  # a released page reads back as zeros: still correct
    assert z.abs().sum().item() == 0


def test_per_process_memory_fraction_raises_the_real_oom():
    cap = torch.neuron.get_device_properties(DEV).total_memory
    ooms = torch.neuron.memory_stats(DEV)["num_ooms"]
    torch.neuron.set_per_process_memory_fraction(0.25, DEV)
    try:
        assert torch.neuron.get_per_process_memory_fraction(DEV) == pytest.approx(0.25)
        ok = torch.empty(cap // 8, dtype=torch.uint8, device=f"neuron:{DEV}")  # within the cap
        with pytest.raises(torch.OutOfMemoryError, match=r"set_per_process_memory_fraction limits.*6.00 GiB"):
            torch.empty(cap // 8 + cap // 8, dtype=torch.uint8, device=f"neuron:{DEV}")
        assert torch.neuron.memory_stats(DEV)["num_ooms"] == ooms + 1
        del ok
        big = torch.empty(cap // 5, dtype=torch.uint8, device=f"neuron:{DEV}")  # fits once freed
        del big
    finally:
        torch.neuron.set_per_process_memory_fraction(1.0, DEV)
    big = torch.empty(cap // 2, dtype=torch.uint8, device=f"neuron:{DEV}")
    del big
    with pytest.raises(ValueError, match="Allowed range"):
        torch.neuron.set_per_process_memory_fraction(1.5, DEV)


def test_oom_is_catchable_and_the_device_stays_usable():
    cap = torch.neuron.get_device_properties(DEV).total_memory
    with pytest.raises(torch.OutOfMemoryError, match=r"NRT allocation failed for size \d+ \(OOM\)"):
        torch.empty(cap + 1, dtype=torch.uint8, device=f"neuron:{DEV}")
    assert (torch.ones(3, device=f"neuron:{DEV}") * 2).sum().item() == 6


def test_docs_code_excerpts_match_the_source():
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "memory.md").read_text()
    source = " ".join((root / "csrc" / "runtime" / "arena.cpp").read_text().split())
    for block in re.findall(r"```cpp\n(.*?)```", doc, re.S):
        assert " ".join(block.split()) in source, block


def test_allocation_that_does_not_fit_retries_after_collecting_cycles():
    # No cached segment is free, but a tensor kept alive only by an
    # unreachable reference cycle can be reclaimed: the retry runs Python's
    # collector, then succeeds, and the retry (not an OOM) is counted.
    r = run_python("""
        import gc, torch, torch_neuron_sim
        cap = torch.neuron.get_device_properties(1).total_memory
        class Holder: pass
        h = Holder(); h.me = h
        h.t = torch.empty(int(cap * 0.6), dtype=torch.uint8, device="neuron:1")
        gc.disable(); del h
        before = torch.neuron.memory_stats(1)
        x = torch.empty(int(cap * 0.6), dtype=torch.uint8, device="neuron:1")
        after = torch.neuron.memory_stats(1)
        print(after["num_alloc_retries"] - before["num_alloc_retries"], after["num_ooms"] - before["num_ooms"])
        y = None
        try:
            y = torch.empty(int(cap * 0.6), dtype=torch.uint8, device="neuron:1")
        except torch.OutOfMemoryError:
            pass
        final = torch.neuron.memory_stats(1)
        print(y is None, final["num_alloc_retries"] - after["num_alloc_retries"], final["num_ooms"] - after["num_ooms"])
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "0", "True", "0", "1"]
