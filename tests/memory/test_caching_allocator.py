"""The caching segment allocator as the release documents it (docs/memory.md):
segments from the device, tensors as blocks inside them, freed blocks cached
in their segment until empty_cache(), two pools, size classes; and the one
set of numbers every memory API reads (reserved >= allocated >= active)."""
import gc

import pytest
import torch
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import torch_neuron_sim
from torch_neuron_sim import _C
from torch_neuron_sim.memory import (
    caching_allocator_alloc, caching_allocator_delete, memory_stats, memory_stats_as_nested_dict,
)

D = "neuron:1"  # a device the rest of the suite leaves quiet
DEV = 1
MiB = 2**20


def _segments(device=DEV):
    return _C._segments(device)  # (offset, size, pool, [(offset, size, requested, allocated)])


def _stat(key, device=DEV):
    return memory_stats(device)[key]


def _check_books(device=DEV):
    """Every statistic agrees with the segments and blocks themselves: no byte
    counted twice or lost, and reserved >= allocated >= active."""
    s = memory_stats_as_nested_dict(device)
    segs = _segments(device)
    for pool in ("small", "large"):
        mine = [seg for seg in segs if seg[2] == pool]
        key = f"{pool}_pool"
        assert s["reserved_bytes"][key]["current"] == sum(seg[1] for seg in mine)
        assert s["segment"][key]["current"] == len(mine)
        live = [b for seg in mine for b in seg[3] if b[3]]
        assert s["allocated_bytes"][key]["current"] == sum(b[1] for b in live)
        assert s["active_bytes"][key]["current"] == sum(b[2] for b in live)
        assert s["allocation"][key]["current"] == len(live)
        split = [b for seg in mine for b in seg[3] if not b[3] and b[1] < seg[1]]
        assert s["inactive_split_bytes"][key]["current"] == sum(b[1] for b in split)
    for off, size, _, blocks in segs:  # blocks tile their segment exactly
        assert blocks[0][0] == off and sum(b[1] for b in blocks) == size
        assert all(a[0] + a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
        assert not any(not a[3] and not b[3] for a, b in zip(blocks, blocks[1:]))  # free neighbours merged
    spans = sorted((off, off + size) for off, size, _, _ in segs)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # segments never overlap
    a = s["allocated_bytes"]["all"]["current"]
    assert s["reserved_bytes"]["all"]["current"] >= a >= s["active_bytes"]["all"]["current"]
    for name in ("reserved_bytes", "allocated_bytes", "active_bytes", "segment", "allocation"):
        assert s[name]["all"]["current"] == s[name]["small_pool"]["current"] + s[name]["large_pool"]["current"]


def _apis_agree(device=DEV):
    """torch.neuron, torch.accelerator (through the C++ DeviceAllocator),
    mem_get_info and memory_summary() read one set of numbers (torch_neuronx's
    functions are torch_neuron_sim.memory's own)."""
    from torch_neuron_sim.memory import _fmt

    ours = dict(memory_stats(device))
    theirs = dict(torch.accelerator.memory_stats(device))
    assert {k: v for k, v in theirs.items() if ours.get(k) != v} == {}
    for name in ("memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved"):
        values = {getattr(m, name)(device) for m in (torch.neuron, torch_neuron_sim.memory, torch.accelerator)}
        assert len(values) == 1, (name, values)
    free, total = torch.neuron.mem_get_info(device)
    assert (free, total) == torch.accelerator.get_memory_info(device)
    assert free == total - ours["reserved_bytes.all.current"] and total == _C._capacity(device)
    rows = {line[:27].strip(): line[27:].split() for line in torch.neuron.memory_summary(device).splitlines()
            if line.startswith(" ") and len(line) > 27}
    for label, key in (("Allocated memory", "allocated_bytes"), ("Reserved memory", "reserved_bytes"),
                       ("Active memory", "active_bytes")):
        assert " ".join(rows[label][:4]) == " ".join([_fmt(ours[f"{key}.all.current"]),
                                                      _fmt(ours[f"{key}.all.peak"])])
    assert rows["Reserved segments"][0] == str(ours["segment.all.current"])


@pytest.fixture(autouse=True)
def _quiet_device():
    torch.neuron.empty_cache()
    yield
    torch.neuron.empty_cache()


def test_size_classes_and_pools():
    # The release: < 16 MB rounded up to a size class, minimum 256 B; >= 16 MB
    # not rounded (256 B alignment); < 1 MB in the small pool.
    assert _C._round_size(1)[:2] == (256, "small")
    assert _C._round_size(256)[:2] == (256, "small")
    assert _C._round_size(257)[0] == 512
    assert _C._round_size(1000)[0] == 1024
    assert _C._round_size(1025)[0] == 1280  # four classes per power of two
    assert _C._round_size(5000)[0] == 5120
    assert _C._round_size(MiB - 1) == (MiB, "small", 2 * MiB)  # the request decides the pool
    assert _C._round_size(MiB)[1] == "large"
    assert _C._round_size(3 * MiB + 1)[0] == int(3.5 * MiB)
    assert _C._round_size(16 * MiB + 1)[0] == 16 * MiB + 256  # not rounded to a class
    # Segments (torch.cuda's sizes): 2 MB small, 20 MB for large blocks < 10 MB, else 2 MB steps.
    assert _C._round_size(1000)[2] == 2 * MiB
    assert _C._round_size(3 * MiB)[2] == 20 * MiB
    assert _C._round_size(11 * MiB)[2] == 12 * MiB
    assert _C._round_size(17 * MiB)[2] == 18 * MiB
    for n in range(1, 20 * MiB, 99991):
        r = _C._round_size(n)[0]
        assert r >= n and r % 256 == 0 and (n < 16 * MiB or r - n < 256)
        assert n <= 256 or r <= n * 1.25 + 256  # at most a quarter of padding


def test_a_freed_block_stays_reserved_and_is_reused():
    x = torch.empty(1000, device=D)  # 4000 B: a 4096 B block in a 2 MB small segment
    assert _stat("allocated_bytes.small_pool.current") == 4096
    assert _stat("active_bytes.small_pool.current") == 4000
    assert _stat("reserved_bytes.small_pool.current") == 2 * MiB
    ptr = x.data_ptr()
    del x
    assert _stat("allocated_bytes.all.current") == 0
    assert _stat("reserved_bytes.small_pool.current") == 2 * MiB  # cached, not returned
    y = torch.empty(1000, device=D)
    assert y.data_ptr() == ptr  # the cached block served the next request of its size
    assert _stat("segment.all.current") == 1
    _check_books()
    del y
    torch.neuron.empty_cache()
    assert _stat("reserved_bytes.all.current") == 0 and _stat("segment.all.current") == 0


def test_blocks_split_and_free_neighbours_merge():
    a, b, c = (torch.empty(3 * MiB // 4, device=D) for _ in range(3))  # 3 MB each, one 20 MB segment
    assert _stat("segment.large_pool.current") == 1
    assert _stat("inactive_split_bytes.large_pool.current") == 20 * MiB - 9 * MiB
    base = a.data_ptr()
    assert (b.data_ptr() - base, c.data_ptr() - base) == (3 * MiB, 6 * MiB)
    del b
    _check_books()
    del a  # merges with b's free block
    blocks = _segments()[0][3]
    assert [(blk[1], blk[3]) for blk in blocks] == [(6 * MiB, False), (3 * MiB, True), (11 * MiB, False)]
    big = torch.empty(6 * MiB // 4, device=D)  # fits the merged hole exactly
    assert big.data_ptr() == base
    _check_books()
    del c, big
    blocks = _segments()[0][3]
    assert [(blk[1], blk[3]) for blk in blocks] == [(20 * MiB, False)]  # one free block again
    assert _stat("inactive_split_bytes.all.current") == 0


def test_empty_cache_with_live_tensors_releases_only_free_segments():
    keep = torch.ones(1000, device=D)
    drop = [torch.ones(3 * MiB // 4, device=D) for _ in range(8)]  # 24 MB: two large segments
    assert _stat("segment.large_pool.current") == 2
    del drop
    torch.neuron.empty_cache()
    assert _stat("segment.large_pool.current") == 0
    assert _stat("segment.small_pool.current") == 1  # keep's segment stays
    assert torch.equal(keep.cpu(), torch.ones(1000))  # its bytes untouched
    _check_books()


def test_stats_agree_across_apis_and_peaks_reset():
    torch.neuron.reset_peak_memory_stats(DEV)
    x = torch.empty(5 * MiB // 4, device=D)
    for get in (torch.neuron.memory_reserved, torch_neuron_sim.memory_reserved,
                lambda d: torch.accelerator.memory_reserved(d)):
        assert get(DEV) == 20 * MiB
    assert torch.neuron.memory_allocated(DEV) == torch.accelerator.memory_allocated(DEV) == 5 * MiB
    assert torch.neuron.max_memory_allocated(DEV) == 5 * MiB
    free, total = torch.neuron.mem_get_info(DEV)
    assert free == total - 20 * MiB
    del x
    assert torch.neuron.max_memory_allocated(DEV) == 5 * MiB
    torch.neuron.reset_peak_memory_stats(DEV)
    assert torch.neuron.max_memory_allocated(DEV) == 0
    assert torch.neuron.max_memory_reserved(DEV) == 20 * MiB  # still held
    assert torch.accelerator.memory_stats(DEV)["inactive_split_bytes.all.current"] == 0
    assert torch.accelerator.memory_stats(DEV)["segment.large_pool.current"] == 1


def test_summary_agrees_with_the_stats():
    x = torch.empty(3 * MiB // 4, device=D)
    rows = {line[:27].strip(): line[27:].split() for line in torch.neuron.memory_summary(DEV).splitlines()
            if line.startswith(" ") and len(line) > 27}
    assert rows["Reserved memory"][:2] == ["20.00", "MiB"]
    assert rows["Allocated memory"][:2] == ["3.00", "MiB"]
    assert rows["Reserved segments"][0] == "1"
    del x


def test_raw_alloc_and_a_bad_free():
    p = caching_allocator_alloc(1000, DEV)
    assert _stat("active_bytes.all.current") == 1000
    with pytest.raises(ValueError, match="not a live block"):
        caching_allocator_delete(p + 256)  # inside the device's memory, but no block starts there
    with pytest.raises(ValueError, match="no neuron device's allocator owns"):
        caching_allocator_delete(12345)
    caching_allocator_delete(p)
    with pytest.raises(ValueError, match="not a live block"):
        caching_allocator_delete(p)  # a double free
    assert _stat("active_bytes.all.current") == 0
    _check_books()


def test_oom_frees_cached_segments_then_names_the_fragmentation(monkeypatch):
    torch.neuron.set_per_process_memory_fraction(64 * MiB / _C._capacity(DEV), DEV)
    try:
        junk = [torch.empty(3 * MiB // 4, device=D) for _ in range(7)]  # 21 MB: two 20 MB segments
        del junk  # cached: 40 MB reserved, nothing allocated
        retries = _stat("num_alloc_retries")
        big = torch.empty(40 * MiB // 4, device=D)  # needs the cached segments back
        assert _stat("num_alloc_retries") == retries + 1
        assert _stat("reserved_bytes.all.current") == 40 * MiB
        ooms = _stat("num_ooms")
        with pytest.raises(torch.OutOfMemoryError) as e:
            torch.empty(30 * MiB // 4, device=D)
        msg = str(e.value)
        assert "neuron:1" in msg and "Tried to allocate 30.00 MiB" in msg
        assert "40.00 MiB is allocated by tensors" in msg and "0.00 B is reserved by the caching allocator but unallocated" in msg
        assert "largest free block is" in msg
        assert _stat("num_ooms") == ooms + 1
        del big
        ok = torch.ones(30 * MiB // 4, device=D)  # the process stays usable
        assert ok.sum().item() == 30 * MiB // 4
        del ok
        _check_books()
    finally:
        torch.neuron.set_per_process_memory_fraction(1.0, DEV)


def test_oom_after_fragmentation_names_the_scattered_free_bytes():
    """Half of three segments free, but in 2 MiB holes between live blocks: a
    6 MiB request finds no hole, no whole free segment to return, and no room
    for a new segment under the limit. The error says so, and no tensor's
    bytes are lost or shared; freeing the neighbours makes the room."""
    base = torch.neuron.memory_reserved(DEV)
    torch.neuron.set_per_process_memory_fraction((base + 64 * MiB) / _C._capacity(DEV), DEV)
    try:
        blocks = [torch.full((2 * MiB,), i, dtype=torch.uint8, device=D) for i in range(30)]  # 3 segments of 20 MB
        assert _stat("segment.large_pool.current") == 3
        kept = blocks[::2]
        del blocks  # every other block freed: 15 holes of 2 MiB
        assert _stat("inactive_split_bytes.all.current") == 30 * MiB
        retries, ooms = _stat("num_alloc_retries"), _stat("num_ooms")
        with pytest.raises(torch.OutOfMemoryError) as e:
            torch.empty(6 * MiB, dtype=torch.uint8, device=D)
        msg = str(e.value)
        assert "Tried to allocate 6.00 MiB" in msg
        assert "30.00 MiB is allocated by tensors, 30.00 MiB is reserved by the caching allocator but unallocated" in msg
        largest = _stat("largest_free_block")
        assert largest < 6 * MiB and f"largest free block is {largest / MiB:.2f} MiB" in msg
        assert _stat("num_ooms") == ooms + 1 and _stat("num_alloc_retries") == retries  # nothing to retry with
        _check_books()
        for i, t in enumerate(kept):  # each survivor keeps its own bytes
            assert bool((t == 2 * i).all().item())
        spans = sorted((t.data_ptr(), t.data_ptr() + t.numel()) for t in kept)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
        del kept[:5]  # the first segment's live blocks: it is whole and free again
        ok = torch.ones(6 * MiB, dtype=torch.uint8, device=D)
        assert bool((ok == 1).all().item())
        del ok, kept, t, e  # e's traceback holds this frame, and the frame the last survivor
        _check_books()
    finally:
        torch.neuron.set_per_process_memory_fraction(1.0, DEV)


def test_snapshot_lists_segments_for_the_visualizer(tmp_path):
    import pickle
    import subprocess
    import sys

    x = torch.empty(1000, device=D)
    y = torch.empty(3 * MiB // 4, device=D)
    snap = torch_neuron_sim.memory._snapshot()
    mine = [s for s in snap["segments"] if s["device"] == DEV]
    assert sorted((s["segment_type"], s["total_size"]) for s in mine) == [("large", 20 * MiB), ("small", 2 * MiB)]
    for s in mine:
        assert sum(b["size"] for b in s["blocks"]) == s["total_size"]
        assert s["allocated_size"] == sum(b["size"] for b in s["blocks"] if b["state"] == "active_allocated")
    path = tmp_path / "snap.pickle"
    with open(path, "wb") as f:
        pickle.dump(snap, f)
    out = tmp_path / "segments.html"
    r = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", "segment_plot", str(path), "-o", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 1000
    del x, y


SIZES = st.one_of(st.integers(1, 4096), st.integers(4097, MiB - 1), st.integers(MiB, 24 * MiB))


class AllocatorMachine(RuleBasedStateMachine):
    """Random allocate/free/empty_cache across both pools: the books hold
    after every step, and each live tensor keeps its own bytes."""

    def __init__(self):
        super().__init__()
        gc.collect()  # a tensor an earlier test left in a reference cycle is not this run's
        torch.neuron.empty_cache()
        self.base = _stat("active_bytes.all.current")  # tensors other tests keep alive (module globals)
        self.live = []  # (tensor, fill value)
        self.n = 0

    @rule(size=SIZES)
    def allocate(self, size):
        self.n += 1
        t = torch.full((size,), self.n % 251, dtype=torch.uint8, device=D)
        self.live.append((t, self.n % 251))

    @precondition(lambda self: self.live)
    @rule(i=st.integers(0, 1000))
    def free(self, i):
        self.live.pop(i % len(self.live))

    @rule()
    def empty_cache(self):
        torch.neuron.empty_cache()
        assert all(seg[3] and any(b[3] for b in seg[3]) for seg in _segments())  # only segments in use stay
        _apis_agree()

    @invariant()
    def books_balance(self):
        _check_books()
        assert _stat("active_bytes.all.current") == self.base + sum(t.numel() for t, _ in self.live)
        spans = sorted((t.data_ptr(), t.data_ptr() + t.numel()) for t, _ in self.live)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # no two tensors share a byte

    def teardown(self):
        _apis_agree()  # after the run's allocations and frees, before they go
        for t, v in self.live:
            assert bool((t == v).all().item())
        self.live.clear()
        torch.neuron.empty_cache()


TestAllocatorMachine = AllocatorMachine.TestCase
# 15 runs of 25 steps by default; the suite's "deep" profile (`make test-deep`) runs its own count.
_profile = settings()
TestAllocatorMachine.settings = settings(_profile, stateful_step_count=25,
                                         max_examples=15 if _profile.max_examples <= 25 else _profile.max_examples)


def test_the_docs_size_class_table_is_what_the_allocator_does():
    import sys
    from pathlib import Path

    scripts = Path(__file__).resolve().parents[2] / "scripts"
    sys.path.insert(0, str(scripts))
    try:
        import memory_classes
    finally:
        sys.path.remove(str(scripts))
    assert memory_classes.in_doc() == memory_classes.table(), "run `python scripts/memory_classes.py`"


def test_the_docs_oom_example_is_what_the_allocator_prints():
    import sys
    from pathlib import Path

    scripts = Path(__file__).resolve().parents[2] / "scripts"
    sys.path.insert(0, str(scripts))
    try:
        import memory_classes
    finally:
        sys.path.remove(str(scripts))
    assert memory_classes.oom_in_doc() == memory_classes.oom_example(), "run `python scripts/memory_classes.py`"
