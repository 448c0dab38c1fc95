"""Snapshots in torch.cuda.memory's format, rendered by PyTorch's own
visualizer, with the caching allocator's segments and blocks and the Python
stack of each allocation."""
import base64
import pickle
import re
import subprocess
import sys

import pytest
import torch

import torch_neuron_sim
from torch_neuron_sim import _C

DEV = 3


pytestmark = pytest.mark.usefixtures("plain_arena")  # the normal block layout: see conftest


@pytest.fixture
def history():
    torch.neuron.memory._record_memory_history(clear_history=True)
    yield
    torch.neuron.memory._record_memory_history(enabled=None, clear_history=True)


def allocate_weights():  # a named frame the snapshot must show
    return torch.empty(3000, dtype=torch.uint8, device=f"neuron:{DEV}")


def blocks_of(snap, device):
    """Every block of every segment of a device."""
    return {"blocks": [blk for s in snap["segments"] if s["device"] == device for blk in s["blocks"]]}


def test_snapshot_segments_cover_their_blocks_and_show_fragmentation(history):
    torch.neuron.empty_cache()
    a = allocate_weights()
    b = torch.empty(5000, dtype=torch.uint8, device=f"neuron:{DEV}")
    c = torch.empty(100, dtype=torch.uint8, device=f"neuron:{DEV}")
    del b  # a hole between a and c
    segments = [s for s in torch.neuron.memory._snapshot()["segments"] if s["device"] == DEV]
    assert sum(s["total_size"] for s in segments) == torch.neuron.memory_reserved(DEV)
    for seg in segments:
        addr = seg["address"]
        for blk in seg["blocks"]:  # contiguous, in address order, covering the segment
            assert blk["address"] == addr
            addr += blk["size"]
        assert addr == seg["address"] + seg["total_size"]
        assert seg["segment_type"] in ("small", "large")
    (seg,) = [s for s in segments if s["address"] <= a.data_ptr() < s["address"] + s["total_size"]]
    assert seg["segment_type"] == "small" and seg["total_size"] == 2 * 2**20  # a 2 MB small-pool segment
    by_addr = {blk["address"]: blk for blk in seg["blocks"]}
    assert by_addr[a.data_ptr()]["state"] == "active_allocated"
    assert by_addr[a.data_ptr()]["requested_size"] == 3000 and by_addr[a.data_ptr()]["size"] == 3072
    hole = by_addr[a.data_ptr() + 3072]
    assert hole["state"] == "inactive" and hole["size"] == 5120  # the freed block stays a visible gap
    assert by_addr[c.data_ptr()]["state"] == "active_allocated"
    live = [blk for s in segments for blk in s["blocks"] if blk["state"] == "active_allocated"]
    assert sum(blk["requested_size"] for blk in live) == torch.neuron.memory_stats(DEV)["active_bytes.all.current"]
    assert sum(blk["size"] for blk in live) == torch.neuron.memory_allocated(DEV)
    del a, c


def test_blocks_and_trace_carry_python_stacks(history):
    a = allocate_weights()
    del a
    b = allocate_weights()
    snap = torch.neuron.memory._snapshot()
    trace = snap["device_traces"][DEV]
    actions = [(e["action"], e["size"]) for e in trace if not e["action"].startswith("segment_")]
    assert actions == [("alloc", 3000), ("free_requested", 3000), ("free_completed", 3000), ("alloc", 3000)]
    frames = trace[0]["frames"]
    assert frames[0]["name"] == "allocate_weights" and frames[0]["filename"] == __file__
    assert frames[1]["name"] == "test_blocks_and_trace_carry_python_stacks"
    assert all(isinstance(e["time_us"], int) for e in trace)
    block = next(blk for blk in blocks_of(snap, DEV)["blocks"] if blk["address"] == b.data_ptr())
    assert block["frames"][0]["name"] == "allocate_weights"
    del b


def test_trace_records_ooms_and_respects_max_entries():
    torch.neuron.memory._record_memory_history(max_entries=3, clear_history=True)
    try:
        for _ in range(3):
            allocate_weights()
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(1 << 50, dtype=torch.uint8, device=f"neuron:{DEV}")
        trace = torch.neuron.memory._snapshot()["device_traces"][DEV]
        assert len(trace) == 3 and trace[-1]["action"] == "oom" and trace[-1]["size"] == 1 << 50
        assert trace[-1]["device_free"] > 0
    finally:
        torch.neuron.memory._record_memory_history(enabled=None, clear_history=True)


def test_nothing_is_recorded_when_history_is_off():
    torch.neuron.memory._record_memory_history(enabled=None, clear_history=True)
    a = allocate_weights()
    snap = torch.neuron.memory._snapshot()
    assert snap["device_traces"][DEV] == []
    block = next(blk for blk in blocks_of(snap, DEV)["blocks"] if blk["address"] == a.data_ptr())
    assert block["frames"] == []
    del a


def test_state_mode_keeps_stacks_without_a_trace():
    torch.neuron.memory._record_memory_history(enabled="state", clear_history=True)
    try:
        a = allocate_weights()
        snap = torch.neuron.memory._snapshot()
        assert snap["device_traces"][DEV] == []
        block = next(blk for blk in blocks_of(snap, DEV)["blocks"] if blk["address"] == a.data_ptr())
        assert block["frames"][0]["name"] == "allocate_weights"
    finally:
        torch.neuron.memory._record_memory_history(enabled=None)


def viz(*args):
    return subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", *args], capture_output=True, text=True,
                          timeout=120)


def test_pytorch_memory_viz_renders_a_dumped_snapshot(history, tmp_path):
    a = allocate_weights()
    b = torch.empty(1 << 20, dtype=torch.float32, device=f"neuron:{DEV}")
    del a
    path = tmp_path / "snapshot.pickle"
    torch.neuron.memory._dump_snapshot(str(path))
    del b

    html = tmp_path / "out.html"
    r = viz("trace_plot", str(path), "-o", str(html))
    assert r.returncode == 0, r.stderr
    page = html.read_text()
    assert "MemoryViz.js" in page and "Active Memory Timeline" in page
    embedded = re.search(r'"base64": "([^"]+)"', page).group(1)
    data = pickle.loads(base64.b64decode(embedded))  # the page carries our snapshot, intact
    assert [e["action"] for e in data["device_traces"][DEV] if not e["action"].startswith("segment_")] == [
        "alloc", "alloc", "free_requested", "free_completed"]

    from torch.cuda import _memory_viz

    summary = _memory_viz.segsum(data)  # checks that the blocks account for every byte of each segment
    assert "total_reserved:" in summary and "segments:" in summary
    assert f"Device {DEV}" in _memory_viz.trace(data)


def test_guarded_blocks_keep_trace_and_blocks_consistent(history):
    _C._set_debug_mode("guard", True)
    try:
        a = allocate_weights()
        snap = torch.neuron.memory._snapshot()
    finally:
        _C._set_debug_mode("guard", False)
    (alloc,) = [e for e in snap["device_traces"][DEV] if e["action"] == "alloc"]
    block = next(blk for blk in blocks_of(snap, DEV)["blocks"] if blk["address"] == alloc["addr"])
    assert alloc["addr"] == a.data_ptr() - 512  # the block starts with its guard bytes
    assert block["state"] == "active_allocated" and block["frames"][0]["name"] == "allocate_weights"
    del a


def test_trace_records_segments_taken_and_returned_for_both_plots(history, tmp_path):
    """torch.cuda's segment_alloc / segment_free: a segment taken from HBM
    before the first block in it, and each whole free segment empty_cache()
    returns; trace_plot and segment_plot carry them, and PyTorch's trace
    reader places each block inside its segment."""
    torch.neuron.empty_cache()
    torch.neuron.memory._record_memory_history(clear_history=True)
    small = torch.empty(3000, dtype=torch.uint8, device=f"neuron:{DEV}")
    large = torch.empty(12 * 2**20, dtype=torch.uint8, device=f"neuron:{DEV}")  # 12 MB: its own 12 MB segment
    small_addr, large_addr = small.data_ptr(), large.data_ptr()
    del small, large
    reserved = torch.neuron.memory_reserved(DEV)
    torch.neuron.empty_cache()  # both segments are free now: both go back
    assert torch.neuron.memory_reserved(DEV) < reserved
    path = tmp_path / "snapshot.pickle"
    torch.neuron.memory._dump_snapshot(str(path))

    trace = torch.neuron.memory._snapshot()["device_traces"][DEV]
    segs = [(e["action"], e["addr"], e["size"]) for e in trace if e["action"].startswith("segment_")]
    taken = [s for s in segs if s[0] == "segment_alloc"]
    returned = [s for s in segs if s[0] == "segment_free"]
    assert sorted(size for _, _, size in taken) == [2 * 2**20, 12 * 2**20]  # a small-pool and a large segment
    assert sorted(returned, key=lambda s: s[1]) == sorted([("segment_free", a, n) for _, a, n in taken],
                                                          key=lambda s: s[1])
    actions = [e["action"] for e in trace]
    for (_, addr, size), block in zip(taken, (small_addr, large_addr)):
        assert addr <= block < addr + size  # each block lies in the segment taken for it
        first_alloc = next(i for i, e in enumerate(trace) if e["action"] == "alloc" and e["addr"] == block)
        assert actions.index("segment_alloc", 0, first_alloc + 1) < first_alloc  # taken before its block
    assert all(actions.index("segment_free") > i for i, a in enumerate(actions) if a == "free_completed")
    seg_frames = next(e for e in trace if e["action"] == "segment_alloc")["frames"]
    assert seg_frames[0]["name"] == "test_trace_records_segments_taken_and_returned_for_both_plots"

    from torch.cuda import _memory_viz

    text = _memory_viz.trace({"segments": [], "device_traces": [[] for _ in range(DEV)] + [trace]})
    assert text.count("cudaMalloc(") == 2 and text.count("cudaFree(") == 2
    assert "MEM[" not in text  # every alloc found the segment it lies in

    for plot, kind in (("trace_plot", "Active Memory Timeline"), ("segment_plot", "Allocator State History")):
        html = tmp_path / f"{plot}.html"
        r = viz(plot, str(path), "-o", str(html))
        assert r.returncode == 0, r.stderr
        page = html.read_text()
        assert kind in page
        data = pickle.loads(base64.b64decode(re.search(r'"base64": "([^"]+)"', page).group(1)))
        drawn = [(e["action"], e["addr"], e["size"]) for e in data["device_traces"][DEV]
                 if e["action"].startswith("segment_")]
        assert drawn == segs
