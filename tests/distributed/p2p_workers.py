"""Per-rank bodies of test_point_to_point.py (2 ranks): send, recv, isend, irecv,
recv from any rank, batch_isend_irecv on the neuron backend. Each rank builds
what its peer sends itself, so every received tensor is checked on the CPU."""
from __future__ import annotations

import datetime
import json
import os
import tempfile
import time

import torch
import torch.distributed as dist

from workers import DTYPES_MOVE, _error, device, make, stay_until_all_done


def point_to_point(rank: int, ws: int) -> dict:
    import torch_neuron_sim
    from torch.profiler import ProfilerActivity, profile

    dev, peer = device(), 1 - rank
    out: dict = {}
    bad: list[str] = []

    # every device dtype, both directions, blocking send/recv
    for i, dtype in enumerate(DTYPES_MOVE + [torch.float8_e4m3fn, torch.complex128]):
        for sender in (0, 1):
            want = make(dtype, (3, 5), sender, salt=i)
            if rank == sender:
                dist.send(want.to(dev), dst=peer, tag=i)
            else:
                got = torch.empty(3, 5, dtype=dtype, device=dev)
                dist.recv(got, src=peer, tag=i)
                if not torch.equal(got.cpu().view(torch.uint8), want.view(torch.uint8)):
                    bad.append(f"{dtype} from rank {sender}: {got.cpu()} != {want}")

    # tags: two isends, received in the other order by tag; two sends on one tag keep their order
    a, b, c, d = (make(torch.float32, (4,), 0, salt=s) for s in (50, 51, 52, 53))
    if rank == 0:
        works = [dist.isend(t.to(dev), dst=1, tag=tag) for t, tag in ((a, 1), (b, 2), (c, 3), (d, 3))]
        for w in works:
            w.wait()
    else:
        got = {k: torch.empty(4, device=dev) for k in "bacd"}
        works = [dist.irecv(got["b"], src=0, tag=2), dist.irecv(got["a"], src=0, tag=1),
                 dist.irecv(got["c"], src=0, tag=3), dist.irecv(got["d"], src=0, tag=3)]
        for w in works:
            w.wait()
        for k, want in zip("abcd", (a, b, c, d)):
            if not torch.equal(got[k].cpu(), want):
                bad.append(f"tagged message {k}: {got[k].cpu()} != {want}")

    # non-contiguous: a transposed tensor sent, received into a strided view
    src = make(torch.float32, (6, 4), 0, salt=60)
    if rank == 0:
        dist.send(src.to(dev).t(), dst=1)
    else:
        buf = torch.zeros(4, 12, device=dev)
        view = buf[:, ::2]  # 4 x 6, non-contiguous
        dist.recv(view, src=0)
        if not torch.equal(view.cpu(), src.t()) or buf[:, 1::2].abs().sum().item() != 0:
            bad.append(f"non-contiguous: {buf.cpu()}")

    # recv from any rank reports the sender
    if rank == 0:
        t = torch.empty(3, device=dev)
        out["any_source"] = (dist.recv(t), t.cpu().tolist())
    else:
        dist.send(torch.full((3,), 7.0, device=dev), dst=0)

    # recvs from any rank and from rank 0 in flight together on one tag: each round's two
    # messages reach the round's two receives, each exactly once, with the sender's rank
    if rank == 0:
        works = [dist.isend(torch.full((4,), float(v), device=dev), dst=1, tag=11) for v in range(16)]
        for w in works:
            w.wait()
    else:
        rounds = []
        for _ in range(8):
            x, y = torch.empty(4, device=dev), torch.empty(4, device=dev)
            wx, wy = dist.irecv(x, tag=11), dist.irecv(y, src=0, tag=11)
            wx.wait(), wy.wait()
            rounds.append((wx._source_rank(), sorted({x[0].item(), y[0].item()}),
                           x.cpu().tolist() == [x[0].item()] * 4 and y.cpu().tolist() == [y[0].item()] * 4))
        out["mixed_sources"] = rounds

    # more sends in flight than the match table holds per pair of ranks (32): the ones that
    # wait for room still reach the receives in the order they were posted
    if rank == 0:
        works = [dist.isend(torch.full((2,), float(v), device=dev), dst=1, tag=12) for v in range(40)]
        for w in works:
            w.wait()
    else:
        time.sleep(0.3)  # the sends first
        got = [torch.empty(2, device=dev) for _ in range(40)]
        works = [dist.irecv(g, src=0, tag=12) for g in got]
        for w in works:
            w.wait()
        out["in_order"] = [g[0].item() for g in got]

    # batch_isend_irecv: both ranks send and receive at once (a ring of 2)
    mine = torch.full((5,), float(rank + 1), device=dev)
    theirs = torch.empty(5, device=dev)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, mine, peer), dist.P2POp(dist.irecv, theirs, peer)])
    for r in reqs:
        r.wait()
    out["batch"] = theirs.cpu().tolist()

    # HBM accounting: contiguous tensors travel as views of arena memory (nothing allocated);
    # a non-contiguous one is staged on the device while the message is in flight
    torch.neuron.synchronize()
    big = torch.ones(64, 128, device=dev)
    time.sleep(0.2)  # an earlier send's tensor goes as the thread that carried it ends: before the baseline
    base = torch.neuron.memory_allocated()
    torch.neuron.reset_peak_memory_stats()
    if rank == 0:
        dist.send(big, dst=1)
        dist.send(big.t(), dst=1)
    else:
        dist.recv(big, src=0)
        dist.recv(big.t(), src=0)
    time.sleep(0.2)  # the staging buffer goes as the thread carrying the message ends
    out["hbm"] = (torch.neuron.max_memory_allocated() - base, torch.neuron.memory_allocated() - base)

    # op tracking, counts with bytes, the migration report, the device timeline
    torch_neuron_sim.distributed.clear_collective_counts()
    torch_neuron_sim.clear_op_tracking()
    t = torch.arange(8, dtype=torch.float32, device=dev)
    with torch_neuron_sim.report() as rep, \
            profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        if rank == 0:
            dist.send(t, dst=1)
            dist.irecv(t, src=1).wait()
        else:
            dist.recv(t, src=0)
            dist.isend(t, dst=0).wait()
    out["counts"] = torch_neuron_sim.distributed.collective_counts()
    out["executed"] = sorted(op for op in torch_neuron_sim.get_executed_ops() if op.startswith("c10d::"))
    out["report"] = (rep.data["point_to_point"], rep.data["collectives"], rep.text())
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    out["events"] = sorted((e["name"], e["pid"], e["args"].get("bytes", 0)) for e in trace["traceEvents"]
                           if e.get("ph") == "X" and e.get("cat") == "kernel"
                           and e["args"].get("kind") == "collective")
    out["bad"] = bad
    return out


def p2p_faults(rank: int, ws: int) -> dict:
    """Sizes that differ, then the tag still works; bad arguments; a peer that never posts."""
    dev, peer = device(), 1 - rank
    out = {}
    if rank == 0:
        out["sizes"] = _error(lambda: dist.send(torch.ones(4, device=dev), dst=1, tag=9))
        dist.send(torch.full((4,), 2.0, device=dev), dst=1, tag=9)
    else:
        out["sizes"] = _error(lambda: dist.recv(torch.empty(5, 2, device=dev), src=0, tag=9))
        t = torch.empty(4, device=dev)
        dist.recv(t, src=0, tag=9)
        out["after"] = t.cpu().tolist()
    out["self"] = _error(lambda: dist.send(torch.ones(2, device=dev), dst=rank))
    out["tag"] = _error(lambda: dist.send(torch.ones(2, device=dev), dst=peer, tag=1 << 30))
    out["cpu"] = _error(lambda: dist.send(torch.ones(2), dst=peer))
    # A peer that never posts, once each way. The group's timeout is 2 s. gloo closes a
    # connection whose operation timed out, so a rank still waiting on the same connection
    # would see "peer closed" instead of its own timeout: one rank waits at a time, each on a
    # group of its own, while the other stays alive without touching that group.
    second = dist.new_group(timeout=datetime.timedelta(seconds=2))
    dist.barrier()
    if rank == 0:
        start = time.monotonic()
        out["never"] = _error(lambda: dist.recv(torch.empty(2, device=dev), src=1, tag=7))
        out["seconds"] = time.monotonic() - start
    stay_until_all_done("p2p_faults/recv", ws)
    if rank == 1:
        start = time.monotonic()
        out["never"] = _error(lambda: dist.send(torch.ones(2, device=dev), dst=0, tag=8, group=second))
        out["seconds"] = time.monotonic() - start
    stay_until_all_done("p2p_faults/send", ws)
    return out
