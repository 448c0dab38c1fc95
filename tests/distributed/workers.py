"""Per-rank bodies of the distributed tests (run by dist_harness in spawned
processes). Each rank computes every rank's inputs itself, so the expected
result of every collective is computed on the CPU in the same process."""
from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist

DTYPES_REDUCE = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16, torch.int32,
                 torch.int64, torch.uint8, torch.bool, torch.float8_e5m2, torch.float8_e4m3fn, torch.complex64,
                 torch.complex128]
DTYPES_MOVE = DTYPES_REDUCE

R = dist.ReduceOp


def device() -> torch.device:
    return torch.device("neuron", torch.neuron.current_device())


def make(dtype: torch.dtype, shape, rank: int, salt: int = 0) -> torch.Tensor:
    """Rank `rank`'s input on the CPU: deterministic, small values (products and
    sums stay exact in every dtype)."""
    g = torch.Generator().manual_seed(1000 * salt + rank)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype == torch.uint8:
        return torch.randint(0, 4, shape, generator=g).to(dtype)
    if not dtype.is_floating_point and not dtype.is_complex:
        return torch.randint(-3, 4, shape, generator=g).to(dtype)
    if dtype.is_complex:
        return torch.complex(torch.randn(shape, generator=g), torch.randn(shape, generator=g)).to(dtype)
    # Floats: multiples of 1/4 in [-2, 2] are exact in every float dtype, float8_e5m2 included.
    return (torch.randint(-8, 9, shape, generator=g).float() / 4).to(dtype)


def ops_for(dtype: torch.dtype):
    if dtype.is_complex:
        return [R.SUM, R.AVG, "premul"]
    if dtype == torch.bool:
        return [R.SUM, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR, R.PRODUCT]
    if dtype.is_floating_point:
        return [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.AVG, "premul"]
    return [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR, R.AVG]


def reference(op, xs: list[torch.Tensor], world_size: int) -> torch.Tensor:
    """The reduction of the ranks' inputs, computed on the CPU in a wide dtype."""
    dtype = xs[0].dtype
    if dtype == torch.bool:
        s = torch.stack([x.to(torch.uint8) for x in xs])
        table = {R.SUM: s.amax(0), R.MAX: s.amax(0), R.BOR: s.amax(0), R.MIN: s.amin(0), R.BAND: s.amin(0),
                 R.PRODUCT: s.amin(0), R.BXOR: s.sum(0) % 2}
        return table[op].bool()
    wide = torch.complex128 if dtype.is_complex else torch.float64 if dtype.is_floating_point else torch.int64
    s = torch.stack([x.to(wide) for x in xs])
    if op == "premul":
        return (s * 0.5).sum(0).to(dtype)
    if op == R.SUM:
        out = s.sum(0)
    elif op == R.AVG:
        out = s.sum(0) / world_size if (dtype.is_floating_point or dtype.is_complex) else \
            torch.div(s.sum(0), world_size, rounding_mode="trunc")
    elif op == R.PRODUCT:
        out = s.prod(0)
    elif op == R.MIN:
        out = s.amin(0)
    elif op == R.MAX:
        out = s.amax(0)
    else:
        acc = s[0]
        for x in s[1:]:
            acc = {R.BAND: torch.bitwise_and, R.BOR: torch.bitwise_or, R.BXOR: torch.bitwise_xor}[op](acc, x)
        out = acc
    return out.to(dtype)  # integer results wrap modulo the dtype, as on the wire


def close(got: torch.Tensor, want: torch.Tensor) -> bool:
    got = got.cpu()
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if got.dtype in (torch.float8_e5m2, torch.float8_e4m3fn):
        got, want = got.float(), want.float()
        return torch.allclose(got, want, rtol=0.25, atol=0.25)
    if got.dtype.is_floating_point or got.dtype.is_complex:
        tol = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}.get(got.dtype, 1e-5)
        return torch.allclose(got, want, rtol=tol, atol=tol)
    return torch.equal(got, want)


def op_name(op) -> str:
    return "PREMUL_SUM(0.5)" if op == "premul" else str(op).split(".")[-1]


def reduce_op(op, dtype):
    if op == "premul":
        return dist._make_nccl_premul_sum(0.5)
    return op


def collectives(rank: int, ws: int) -> dict:
    """Every collective x reduce op x dtype against a CPU reference. Returns
    the failures (empty when all agree) and what op tracking recorded."""
    import torch_neuron_sim

    dev = device()
    assert dev.index == rank, f"rank {rank} runs on {dev} (LOCAL_RANK should map to neuron:{rank})"
    assert dist.get_backend() == "neuron", dist.get_backend()
    torch_neuron_sim.clear_op_tracking()
    bad: list[str] = []

    def check(what: str, got, want):
        if not close(got, want):
            bad.append(f"{what}: got {got.cpu()} want {want}")

    shape = (3, 4)
    for salt, dtype in enumerate(DTYPES_REDUCE):
        xs = [make(dtype, shape, r, salt) for r in range(ws)]
        for op in ops_for(dtype):
            t = xs[rank].to(dev)
            dist.all_reduce(t, op=reduce_op(op, dtype))
            check(f"all_reduce {op_name(op)} {dtype}", t, reference(op, xs, ws))
        # reduce to the last rank; reduce_scatter, on the tensor and list forms: every op the dtype has
        for op in ops_for(dtype):
            want = reference(op, xs, ws)
            t = xs[rank].to(dev)
            dist.reduce(t, dst=ws - 1, op=reduce_op(op, dtype))
            if rank == ws - 1:
                check(f"reduce {op_name(op)} {dtype}", t, want)
            big = [make(dtype, (ws * 2, 3), r, salt + 50) for r in range(ws)]
            out = torch.empty(2, 3, dtype=dtype, device=dev)
            dist.reduce_scatter_tensor(out, big[rank].to(dev), op=reduce_op(op, dtype))
            check(f"reduce_scatter_tensor {op_name(op)} {dtype}", out,
                  reference(op, big, ws)[2 * rank:2 * rank + 2])
            lst = [c.to(dev) for c in big[rank].chunk(ws)]
            out2 = torch.empty(2, 3, dtype=dtype, device=dev)
            dist.reduce_scatter(out2, lst, op=reduce_op(op, dtype))
            check(f"reduce_scatter {op_name(op)} {dtype}", out2, reference(op, big, ws)[2 * rank:2 * rank + 2])

    for salt, dtype in enumerate(DTYPES_MOVE):
        xs = [make(dtype, (2, 3), r, salt + 100) for r in range(ws)]
        mine = xs[rank].to(dev)
        t = mine.clone()
        dist.broadcast(t, src=ws - 1)
        check(f"broadcast {dtype}", t, xs[ws - 1])
        outs = [torch.empty(2, 3, dtype=dtype, device=dev) for _ in range(ws)]
        dist.all_gather(outs, mine)
        for r in range(ws):
            check(f"all_gather {dtype} [{r}]", outs[r], xs[r])
        flat = torch.empty(ws * 2, 3, dtype=dtype, device=dev)
        dist.all_gather_into_tensor(flat, mine)
        check(f"all_gather_into_tensor {dtype}", flat, torch.cat(xs))
        send = make(dtype, (ws * 2, 3), rank, salt + 200)
        recv = torch.empty_like(send, device=dev)
        dist.all_to_all_single(recv, send.to(dev))
        want = torch.cat([make(dtype, (ws * 2, 3), r, salt + 200)[2 * rank:2 * rank + 2] for r in range(ws)])
        check(f"all_to_all_single {dtype}", recv, want)
        outs = [torch.empty(2, 3, dtype=dtype, device=dev) for _ in range(ws)]
        dist.all_to_all(outs, [c.to(dev) for c in send.chunk(ws)])
        check(f"all_to_all {dtype}", torch.cat([o.cpu() for o in outs]), want)
        gathered = [torch.empty(2, 3, dtype=dtype, device=dev) for _ in range(ws)] if rank == 0 else None
        dist.gather(mine, gathered, dst=0)
        if rank == 0:
            check(f"gather {dtype}", torch.cat([g.cpu() for g in gathered]), torch.cat(xs))
        out = torch.empty(2, 3, dtype=dtype, device=dev)
        dist.scatter(out, [x.to(dev) for x in xs] if rank == ws - 1 else None, src=ws - 1)
        check(f"scatter {dtype}", out, xs[rank])

    # Non-contiguous inputs and outputs (transposed, strided, expanded)
    xs = [make(torch.float32, (4, 6), r, 300) for r in range(ws)]
    t = xs[rank].to(dev).t()
    dist.all_reduce(t)
    check("all_reduce transposed", t, reference(R.SUM, xs, ws).t())
    base = xs[rank].to(dev)
    t = base[:, ::2]
    dist.all_reduce(t, op=R.MAX)
    check("all_reduce strided view", t, reference(R.MAX, [x[:, ::2] for x in xs], ws))
    check("all_reduce strided view leaves the rest", base[:, 1::2], xs[rank][:, 1::2])
    t = xs[rank].to(dev).t()
    dist.broadcast(t, src=0)
    check("broadcast transposed", t, xs[0].t())
    outs = [torch.empty(4, 4, device=dev).t() for _ in range(ws)]
    dist.all_gather(outs, xs[rank].to(dev)[:, :4].t().contiguous().t())
    for r in range(ws):
        check(f"all_gather non-contiguous [{r}]", outs[r], xs[r][:, :4])
    exp = torch.ones(1, 4, device=dev).expand(2, 4) * 0 + (rank + 1)  # materialised, then an expanded input:
    src = torch.full((1, 4), float(rank + 1), device=dev).expand(2, 4)
    flat = torch.empty(2 * ws, 4, device=dev)
    dist.all_gather_into_tensor(flat, src)
    check("all_gather_into_tensor expanded input", flat,
          torch.cat([torch.full((2, 4), float(r + 1)) for r in range(ws)]))
    del exp

    # async_op=True: Work.wait() and get_future()
    t = xs[rank].to(dev)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    check("all_reduce async wait", t, reference(R.SUM, xs, ws))
    t = xs[rank].to(dev)
    fut = dist.all_reduce(t, op=R.AVG, async_op=True).get_future()
    value = fut.wait()
    check("all_reduce async future", value[0], reference(R.AVG, xs, ws))
    check("all_reduce async future (in place)", t, reference(R.AVG, xs, ws))
    assert value[0].device == dev, value[0].device
    flat = torch.empty(2 * ws, 3, device=dev)
    w = dist.all_gather_into_tensor(flat, torch.full((2, 3), float(rank), device=dev), async_op=True)
    assert w.wait()
    check("all_gather_into_tensor async", flat, torch.cat([torch.full((2, 3), float(r)) for r in range(ws)]))

    # Many collectives in flight at once (issued without waiting, as DDP's buckets and FSDP's
    # prefetches are): each completes with its own data, in any order of waiting.
    ins = [[make(torch.float32, (n,), r, 600 + n) for r in range(ws)] for n in (1, 1000, 1 << 16, 7)]
    ts = [x[rank].to(dev) for x in ins]
    flat = torch.empty(ws * 3, device=dev)
    works = [dist.all_reduce(t, async_op=True) for t in ts[:2]]
    works.append(dist.all_gather_into_tensor(flat, torch.full((3,), float(rank), device=dev), async_op=True))
    works += [dist.all_reduce(t, op=R.MAX, async_op=True) for t in ts[2:]]
    for w in reversed(works):
        w.wait()
    for i, t in enumerate(ts):
        check(f"in flight all_reduce [{i}]", t, reference(R.SUM if i < 2 else R.MAX, ins[i], ws))
    check("in flight all_gather_into_tensor", flat, torch.cat([torch.full((3,), float(r)) for r in range(ws)]))
    # A callback chained on a collective's future issues and waits for another (PowerSGD's hook does)
    first, second = torch.ones(4, device=dev), torch.full((2,), float(rank), device=dev)
    fut = dist.all_reduce(first, async_op=True).get_future().then(
        lambda f: dist.all_reduce(second, async_op=True).get_future().wait()[0] + f.value()[0][:2])
    check("collective waited in a future callback", fut.wait(), torch.full((2,), float(sum(range(ws)) + ws)))

    # Coalesced forms (ProcessGroup methods: the entry points DDP, FSDP and the coalescing manager use),
    # on a float, a narrow float, an integer dtype gloo reduces and one it reduces widened (int16 in int32)
    pg = dist.group.WORLD
    for salt, dtype in enumerate((torch.float32, torch.bfloat16, torch.int32, torch.int16)):
        a = [make(dtype, (5,), r, 400 + salt) for r in range(ws)]
        b = [make(dtype, (2, 2), r, 410 + salt) for r in range(ws)]
        big = [make(dtype, (ws * 2,), r, 420 + salt) for r in range(ws)]
        big2 = [make(dtype, (ws * 3,), r, 430 + salt) for r in range(ws)]
        for op in ops_for(dtype):
            name = f"{op_name(op)} {dtype}"
            ta, tb = a[rank].to(dev), b[rank].to(dev)
            dist.all_reduce_coalesced([ta, tb], op=reduce_op(op, dtype))
            check(f"allreduce_coalesced {name} [0]", ta, reference(op, a, ws))
            check(f"allreduce_coalesced {name} [1]", tb, reference(op, b, ws))
            outs = [torch.empty(2, dtype=dtype, device=dev), torch.empty(3, dtype=dtype, device=dev)]
            opts = dist.ReduceScatterOptions()
            opts.reduceOp = reduce_op(op, dtype)
            pg.reduce_scatter_tensor_coalesced(outs, [big[rank].to(dev), big2[rank].to(dev)], opts).wait()
            check(f"reduce_scatter_tensor_coalesced {name} [0]", outs[0],
                  reference(op, big, ws)[2 * rank:2 * rank + 2])
            check(f"reduce_scatter_tensor_coalesced {name} [1]", outs[1],
                  reference(op, big2, ws)[3 * rank:3 * rank + 3])
        outs = [torch.empty(ws * 5, dtype=dtype, device=dev), torch.empty(ws * 2, 2, dtype=dtype, device=dev)]
        pg.allgather_into_tensor_coalesced(outs, [a[rank].to(dev), b[rank].to(dev)]).wait()
        check(f"allgather_into_tensor_coalesced {dtype} [0]", outs[0], torch.cat(a))
        check(f"allgather_into_tensor_coalesced {dtype} [1]", outs[1], torch.cat(b))
        lists = [[torch.empty(5, dtype=dtype, device=dev), torch.empty(2, 2, dtype=dtype, device=dev)]
                 for _ in range(ws)]  # [rank][input]
        pg.allgather_coalesced(lists, [a[rank].to(dev), b[rank].to(dev)]).wait()
        for r in range(ws):
            check(f"allgather_coalesced {dtype} [{r}][0]", lists[r][0], a[r])
            check(f"allgather_coalesced {dtype} [{r}][1]", lists[r][1], b[r])
    a = [make(torch.float32, (5,), r, 400) for r in range(ws)]
    big = [make(torch.float32, (ws * 2,), r, 420) for r in range(ws)]

    # Functional collectives (what DTensor, TP and torch.compile use)
    import torch.distributed._functional_collectives as funcol

    x = a[rank].to(dev)
    check("funcol.all_reduce", funcol.all_reduce(x, "sum", pg), reference(R.SUM, a, ws))
    check("funcol.all_reduce avg", funcol.all_reduce(x, "avg", pg), reference(R.AVG, a, ws))
    check("funcol.all_gather_tensor", funcol.all_gather_tensor(x, 0, pg), torch.cat(a))
    rs = funcol.reduce_scatter_tensor(big[rank].to(dev), "sum", 0, pg)
    check("funcol.reduce_scatter_tensor", rs, reference(R.SUM, big, ws)[2 * rank:2 * rank + 2])
    a2a = funcol.all_to_all_single(big[rank].to(dev), None, None, pg)
    check("funcol.all_to_all_single", a2a, torch.cat([bb[2 * rank:2 * rank + 2] for bb in big]))

    # Object collectives travel as neuron tensors in a neuron-only group
    objs = [None] * ws
    dist.all_gather_object(objs, {"rank": rank})
    if objs != [{"rank": r} for r in range(ws)]:
        bad.append(f"all_gather_object: {objs}")
    lst = [f"from {rank}"]
    dist.broadcast_object_list(lst, src=ws - 1)
    if lst != [f"from {ws - 1}"]:
        bad.append(f"broadcast_object_list: {lst}")
    dist.barrier()

    # Big enough to exercise gloo's chunked algorithms
    xs = [make(torch.float32, (1 << 18,), r, 500) for r in range(ws)]
    t = xs[rank].to(dev)
    dist.all_reduce(t)
    check("all_reduce 1 MiB", t, reference(R.SUM, xs, ws))

    return {"bad": bad, "dtypes": [str(d) for d in DTYPES_REDUCE], "executed": torch_neuron_sim.get_executed_ops(),
            "counts": torch_neuron_sim.distributed.collective_counts(),
            "backend": dist.get_backend(), "name": pg._get_backend(dev).name()}


def hbm_accounting(rank: int, ws: int) -> dict:
    """Collective buffers in the device's memory accounting. For each case:
    (peak - baseline, allocated after - baseline) in bytes, the inputs and
    outputs already allocated in the baseline."""
    import torch.distributed._functional_collectives as funcol

    dev = device()
    mem = torch.neuron

    def measure(fn) -> tuple[int, int]:
        base = mem.memory_allocated(dev)
        mem.reset_peak_memory_stats(dev)
        fn()
        peak = mem.max_memory_allocated(dev)
        # A staging buffer is released by the completion callback on gloo's thread, which may
        # finish just after wait() has returned: allow it a moment.
        end = time.monotonic() + 2
        while mem.memory_allocated(dev) != base and time.monotonic() < end:
            time.sleep(0.01)
        return peak - base, mem.memory_allocated(dev) - base

    out = {}
    # contiguous tensors: gloo works on the device bytes themselves, nothing is allocated
    gathered, mine = torch.empty(ws * 1024, device=dev), torch.full((1024,), float(rank), device=dev)
    out["all_gather_into_tensor"] = measure(lambda: dist.all_gather_into_tensor(gathered, mine))
    assert torch.equal(gathered.cpu(), torch.arange(ws).float().repeat_interleave(1024))
    summed = torch.ones(1024, device=dev)
    out["all_reduce"] = measure(lambda: dist.all_reduce(summed))
    # a non-contiguous input: a contiguous staging copy on the device (64 x 128 float32)
    transposed = torch.ones(64, 128, device=dev).t()
    out["all_reduce_transposed"] = measure(lambda: dist.all_reduce(transposed))
    assert torch.equal(transposed.cpu(), torch.full((128, 64), float(ws)))
    # int16 is reduced widened to int32: a staging buffer of twice its bytes
    short = torch.ones(4096, dtype=torch.int16, device=dev)
    out["all_reduce_int16"] = measure(lambda: dist.all_reduce(short))
    # reduce_scatter reduces a private copy of the whole input
    whole, part = torch.ones(ws * 1024, device=dev), torch.empty(1024, device=dev)
    out["reduce_scatter_tensor"] = measure(lambda: dist.reduce_scatter_tensor(part, whole))
    # a collective that allocates its output: counted while the output lives, released with it
    result = []
    out["funcol_all_gather"] = measure(
        lambda: result.append(funcol.all_gather_tensor(mine, 0, dist.group.WORLD).wait()))
    assert result[0].device == dev and torch.equal(result[0].cpu(), gathered.cpu())
    out["funcol_all_gather_freed"] = measure(result.clear)
    return out


# ---- the PyTorch stack: DDP, FSDP2, tensor parallel, DTensor, checkpointing ----------

STEPS = 5
IN, HIDDEN, OUT, BATCH = 8, 16, 4, 8


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, OUT))


def batches():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(BATCH, IN, generator=g), torch.randn(BATCH, OUT, generator=g)) for _ in range(STEPS)]


def cpu_losses() -> list[float]:
    """Single-process CPU training: the reference every parallel run must match."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = []
    for x, y in batches():
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def _global_mean(loss: torch.Tensor) -> float:
    loss = loss.detach().clone()
    dist.all_reduce(loss, op=R.AVG)
    return loss.item()


NO_SYNC_STEP = 2


def _half_losses(model, xs, ys):
    """The two halves of a rank's shard, each weighted 1/2: their gradients add up to the shard's."""
    h = xs.shape[0] // 2
    yield torch.nn.functional.mse_loss(model(xs[:h]), ys[:h]) / 2
    yield torch.nn.functional.mse_loss(model(xs[h:]), ys[h:]) / 2


def train_ddp(rank: int, ws: int) -> tuple[list[float], dict]:
    """Losses per step, and what happened in the no_sync step: allreduce calls during the
    backward inside no_sync and during the one after it, the gradients after each (as lists:
    a tensor sent back would need this process alive), and the allreduce calls of the
    other steps' backward."""
    import torch_neuron_sim
    from torch.nn.parallel import DistributedDataParallel as DDP

    dev = device()
    # bucket_cap_mb tiny: several buckets per step
    model = DDP(mlp().to(dev), bucket_cap_mb=0.0005)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out, no_sync = [], {}
    per = BATCH // ws

    def allreduces(backward) -> int:
        torch_neuron_sim.distributed.clear_collective_counts()
        backward()
        return torch_neuron_sim.distributed.collective_counts().get("c10d::allreduce_", {}).get("calls", 0)

    for i, (x, y) in enumerate(batches()):
        xs, ys = x[rank * per:(rank + 1) * per].to(dev), y[rank * per:(rank + 1) * per].to(dev)
        if i == NO_SYNC_STEP:
            # no_sync: accumulate the two halves of this rank's shard locally, then sync once
            halves = _half_losses(model, xs, ys)
            with model.no_sync():
                l1 = next(halves)
                no_sync["inside"] = allreduces(l1.backward)
            no_sync["grads_inside"] = [p.grad.tolist() for p in model.parameters()]
            l2 = next(halves)
            no_sync["after"] = allreduces(l2.backward)
            no_sync["grads_after"] = [p.grad.tolist() for p in model.parameters()]
            loss = l1 + l2
        else:
            loss = torch.nn.functional.mse_loss(model(xs), ys)
            no_sync[f"step {i}"] = allreduces(loss.backward)
        opt.step()
        opt.zero_grad()
        out.append(_global_mean(loss))
    return out, no_sync


def cpu_no_sync_grads(ws: int) -> tuple[list[list[torch.Tensor]], list[torch.Tensor]]:
    """On the CPU, at the no_sync step of train_ddp: each rank's gradient of its shard's first half
    (what no_sync leaves local), and the mean over ranks of the whole shards' (after the sync)."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = batches()
    for x, y in data[:NO_SYNC_STEP]:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    x, y = data[NO_SYNC_STEP]
    per = BATCH // ws
    first, total = [], [torch.zeros_like(p) for p in model.parameters()]
    for r in range(ws):
        opt.zero_grad()
        halves = _half_losses(model, x[r * per:(r + 1) * per], y[r * per:(r + 1) * per])
        next(halves).backward()
        first.append([p.grad.clone() for p in model.parameters()])
        next(halves).backward()
        total = [t + p.grad / ws for t, p in zip(total, model.parameters())]
    return first, total


class WithUnused(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp()
        self.unused = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.net(x)


def train_ddp_unused(rank: int, ws: int) -> list[float]:
    from torch.nn.parallel import DistributedDataParallel as DDP

    dev = device()
    model = DDP(WithUnused().to(dev), find_unused_parameters=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = []
    per = BATCH // ws
    for x, y in batches():
        xs, ys = x[rank * per:(rank + 1) * per].to(dev), y[rank * per:(rank + 1) * per].to(dev)
        loss = torch.nn.functional.mse_loss(model(xs), ys)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(_global_mean(loss))
    return out


def train_fsdp2(rank: int, ws: int, bf16: bool) -> list[float]:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh("neuron", (ws,))
    model = mlp().to(device())
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 else MixedPrecisionPolicy()
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = []
    per = BATCH // ws
    for x, y in batches():
        xs, ys = x[rank * per:(rank + 1) * per].to(device()), y[rank * per:(rank + 1) * per].to(device())
        loss = torch.nn.functional.mse_loss(model(xs).float(), ys)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(_global_mean(loss))
    return out


def train_tp(rank: int, ws: int) -> list[float]:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("neuron", (ws,))
    model = parallelize_module(mlp().to(device()), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = []
    for x, y in batches():  # every rank sees the whole batch; the weights are split
        loss = torch.nn.functional.mse_loss(model(x.to(device())), y.to(device()))
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def dtensor_round_trips(rank: int, ws: int) -> list[str]:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("neuron", (ws,))
    assert mesh.device_type == "neuron"
    bad = []
    full = torch.arange(4 * ws * 6, dtype=torch.float32).reshape(4 * ws, 6)
    d = distribute_tensor(full.to(device()), mesh, [Shard(0)])
    if d.to_local().device != device() or d.to_local().shape != (4, 6):
        bad.append(f"Shard(0) local {d.to_local().shape} on {d.to_local().device}")
    for placements in ([Replicate()], [Shard(1)], [Shard(0)]):
        d = d.redistribute(mesh, placements)
        if not torch.equal(d.full_tensor().cpu(), full):
            bad.append(f"redistribute to {placements}: full_tensor differs")
    # Partial: each rank holds a term of the sum
    from torch.distributed.tensor import DTensor

    # (rows differ, so a wrong row of the sum on a rank shows)
    term = torch.arange(2 * ws * 3, dtype=torch.float32).reshape(2 * ws, 3)
    total = term * sum(range(1, ws + 1))
    part = DTensor.from_local((term * (rank + 1)).to(device()), mesh, [Partial()])
    rep = part.redistribute(mesh, [Replicate()])
    if not torch.equal(rep.to_local().cpu(), total):
        bad.append(f"Partial -> Replicate: {rep.to_local()}")
    sh = part.redistribute(mesh, [Shard(0)])
    if not torch.equal(sh.to_local().cpu(), total[2 * rank:2 * rank + 2]):
        bad.append(f"Partial -> Shard(0): rank {rank} holds {sh.to_local().cpu()}, "
                   f"want rows {2 * rank}-{2 * rank + 1} of {total}")
    if not torch.equal(sh.full_tensor().cpu(), total):
        bad.append(f"Partial -> Shard(0) -> full_tensor: {sh.full_tensor().cpu()}")
    # a DTensor op: matmul of a sharded and a replicated tensor
    a = distribute_tensor(full.to(device()), mesh, [Shard(0)])
    b = distribute_tensor(torch.ones(6, 2, device=device()), mesh, [Replicate()])
    if not torch.allclose((a @ b).full_tensor().cpu(), full @ torch.ones(6, 2)):
        bad.append("sharded matmul differs")
    return bad


def save_checkpoint(rank: int, ws: int, path: str) -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("neuron", (ws,))
    model = mlp().to(device())
    fully_shard(model, mesh=mesh)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)  # a state different from mlp()'s initial one
    dcp.save(get_model_state_dict(model), checkpoint_id=path)


def stack(rank: int, ws: int, ckpt: str) -> dict:
    """DDP, FSDP2 (fp32 and bf16), tensor parallel, DTensor and a checkpoint, in one job."""
    ddp, no_sync = train_ddp(rank, ws)
    return {
        "ddp": ddp,
        "ddp_no_sync": no_sync,
        "ddp_unused": train_ddp_unused(rank, ws),
        "fsdp2": train_fsdp2(rank, ws, bf16=False),
        "fsdp2_bf16": train_fsdp2(rank, ws, bf16=True),
        "tp": train_tp(rank, ws),
        "dtensor": dtensor_round_trips(rank, ws),
        "ckpt": save_checkpoint(rank, ws, ckpt),
    }


# ---- faults: clear errors on every rank, never a hang ---------------------------------

def _error(fn) -> str:
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the message is what the test checks
        return f"{type(e).__name__}: {e}"
    return "no error"


def stay_until_all_done(name: str, ws: int, timeout: float = 60.0) -> None:
    """Keeps this rank alive until every rank has got here, counted on the
    group's store (the group itself may be unusable after a fault). A test of
    a timeout has one rank wait for a peer that stays silent; had the peer
    exited first - a slow start on a busy machine is enough - the waiting rank
    would see a closed connection instead of its timeout, and a rank that
    starts after rank 0 exited could not reach rank 0's store at all."""
    store = dist.distributed_c10d._get_default_store()
    key = f"all-done/{name}"
    store.add(key, 1)
    deadline = time.monotonic() + timeout
    while store.add(key, 0) < ws and time.monotonic() < deadline:
        time.sleep(0.05)


def faults(rank: int, ws: int) -> dict:
    """Errors that leave the group usable, in one job; each entry is the
    message this rank saw."""
    dev = device()
    out = {}
    out["shape"] = _error(lambda: dist.all_reduce(torch.ones(4 + rank, 3, device=dev)))
    out["dtype"] = _error(lambda: dist.all_reduce(
        torch.ones(4, device=dev, dtype=torch.float32 if rank == 0 else torch.bfloat16)))
    # a disagreement past what the record spells out (its 48 slots hold 14 one-dim tensors): still caught
    out["hidden"] = _error(lambda: dist.all_reduce_coalesced(
        [torch.ones(2, device=dev) for _ in range(19)] + [torch.ones(2 + rank, device=dev)]))
    out["which"] = _error(lambda: dist.broadcast(torch.ones(2, device=dev), 0) if rank == 0
                          else dist.all_reduce(torch.ones(2, device=dev)))
    # invalid arguments on one rank only: it says why, the others name it
    out["local"] = _error(lambda: dist.all_gather(
        [torch.empty(2, device=dev) for _ in range(ws + (1 if rank == 0 else 0))], torch.ones(2, device=dev)))
    out["uneven"] = _error(lambda: dist.all_to_all_single(
        torch.empty(3 * ws, device=dev), torch.ones(3 * ws, device=dev),
        output_split_sizes=[1] + [3] * (ws - 2) + [5] if ws > 1 else None,
        input_split_sizes=[1] + [3] * (ws - 2) + [5]))
    out["band_float"] = _error(lambda: dist.all_reduce(torch.ones(2, device=dev), op=R.BAND))
    # invalid arguments on one rank while a collective of every rank is still in flight
    t = torch.ones(3, device=dev)
    work = dist.all_reduce(t, async_op=True)
    out["local_in_flight"] = _error(lambda: dist.all_gather(
        [torch.empty(2, device=dev) for _ in range(ws + (1 if rank == 1 else 0))], torch.ones(2, device=dev)))
    work.wait()
    out["in_flight_result"] = t.cpu().tolist()
    out["cpu_tensor"] = _error(lambda: dist.all_reduce(torch.ones(2)))
    out["monitored_barrier"] = _error(lambda: dist.monitored_barrier())
    # the ProcessGroup's own method skips torch's check and reaches the backend, which refuses it too
    out["pg_monitored_barrier"] = _error(lambda: dist.group.WORLD.monitored_barrier())
    # the group still works after all of that
    t = torch.full((3,), float(rank + 1), device=dev)
    dist.all_reduce(t)
    out["after"] = t.cpu().tolist()
    # CPU tensors share a group created with "cpu:gloo,neuron:neuron"
    mixed = dist.new_group(backend="cpu:gloo,neuron:neuron")
    c, n = torch.ones(2) * (rank + 1), torch.ones(2, device=dev) * (rank + 1)
    dist.all_reduce(c, group=mixed)
    dist.all_reduce(n, group=mixed)
    out["mixed"] = (c.tolist(), n.cpu().tolist(), dist.get_backend(mixed))
    # ranks on one machine agree through shared memory, whose name is already removed
    out["agreement_segments"] = [line.split()[-2:] for line in open("/proc/self/maps") if "neuron_sim_agree_" in line]
    return out


def missing_rank(rank: int, ws: int) -> str:
    """Rank 1 never arrives: rank 0 fails after the group's timeout (2 s)."""
    if rank == 1:
        time.sleep(8)  # alive but absent (an exit would close the connection instead)
        stay_until_all_done("missing_rank", ws)
        return "absent"
    start = time.monotonic()
    msg = _error(lambda: dist.all_reduce(torch.ones(2, device=device())))
    msg = f"{msg} [after {time.monotonic() - start:.1f}s]"
    stay_until_all_done("missing_rank", ws)  # rank 0 holds the store rank 1 connects to
    return msg


def dying_rank(rank: int, ws: int) -> str:
    """Rank 1 dies: rank 0's next collective fails instead of hanging."""
    dist.all_reduce(torch.ones(2, device=device()))  # both alive and connected
    if rank == 1:
        os._exit(3)
    time.sleep(0.5)
    start = time.monotonic()
    msg = _error(lambda: dist.all_reduce(torch.ones(2, device=device())))
    return f"{msg} [after {time.monotonic() - start:.1f}s]"


def file_store_mismatch(rank: int, ws: int, path: str) -> tuple:
    """A group on a FileStore: the agreement runs over a gloo all-gather instead of the store."""
    dist.init_process_group("neuron", init_method=f"file://{path}", rank=rank, world_size=ws)
    t = torch.full((3,), float(rank + 1), device=device())
    dist.all_reduce(t)
    return t.cpu().tolist(), _error(lambda: dist.all_reduce(torch.ones(4 + rank, device=device())))


def default_backend(rank: int, ws: int, second_port: int) -> tuple:
    """init_process_group() with no backend on a machine whose accelerator is neuron; then
    init_process_group(device_id=neuron:rank), also with no backend (r[8])."""
    dist.init_process_group(init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}", rank=rank, world_size=ws)
    import torch_neuron_sim
    t = torch.ones(2, device=device())
    torch_neuron_sim.distributed.clear_collective_counts()
    with torch_neuron_sim.report() as rep:  # the migration report's collectives section
        dist.all_reduce(t)
    ran_on_neuron = torch_neuron_sim.distributed.collective_counts()  # counted by the neuron backend only
    pg = dist.distributed_c10d._get_default_group()
    # A compiled graph with a functional collective: Dynamo's graphs_with_collectives counter.
    import torch.distributed._functional_collectives as funcol
    from torch._dynamo.utils import counters
    f = torch.compile(lambda x: torch.relu(funcol.all_reduce(x * 2, "sum", dist.group.WORLD)),
                      backend="neuron", options={"executor": "graph"})
    y = f(torch.full((3,), float(rank + 1), device=device()))
    first = (dist.get_backend(), t.cpu().tolist(), pg._get_backend(torch.device("neuron")).name(),
             y.cpu().tolist(), counters["neuron"]["graphs_with_collectives"], counters["neuron"]["compiled_graphs"],
             rep.data["collectives"], rep.text(), ran_on_neuron)
    # device_id names the device: torch looks its backend up in default_device_backend_map
    dist.destroy_process_group()
    dist.init_process_group(init_method=f"tcp://127.0.0.1:{second_port}", rank=rank, world_size=ws,
                            device_id=torch.device("neuron", rank))
    t = torch.full((2,), float(rank + 1), device=device())
    dist.all_reduce(t)
    return first + ((dist.get_backend(), t.cpu().tolist()),)


def async_faults(rank: int, ws: int) -> dict:
    """Async collectives are queued for their agreement when a peer is not there
    yet: a disagreement raises from wait() or the future (or from the call, on a
    rank whose peers were all there), with the message a synchronous call has."""
    dev = device()
    out = {}
    out["wait"] = _error(lambda: dist.all_reduce(torch.ones(4 + rank, 3, device=dev), async_op=True).wait())
    out["future"] = _error(lambda: dist.all_reduce(torch.ones(4 + rank, device=dev), async_op=True)
                           .get_future().wait())
    # a rank behind its peers: they queue what they issue, in order, and the group stays usable
    if rank == 0:
        time.sleep(0.5)
    ts = [torch.full((3,), float(rank + i), device=dev) for i in range(4)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    # (from the call instead, on a machine slow enough that rank 0 is there first after all)
    out["late_mismatch"] = _error(lambda: dist.all_reduce(torch.ones(2 + rank, device=dev), async_op=True).wait())
    for w in works:
        w.wait()
    out["in_order"] = [t.cpu().tolist() for t in ts]
    # a group shut down with a collective still queued (its peer never issues it): it fails, no hang
    group = dist.new_group(backend="neuron")
    if rank == 1:
        work = dist.all_reduce(torch.ones(2, device=dev), group=group, async_op=True)
        start = time.monotonic()
        dist.destroy_process_group(group)
        out["shut_down"] = f"{_error(work.wait)} [after {time.monotonic() - start:.1f}s]"
    else:
        dist.destroy_process_group(group)
    dist.barrier()  # rank 0 (which holds the store) stays until rank 1 is done with its group
    return out
