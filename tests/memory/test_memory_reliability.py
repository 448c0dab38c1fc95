"""The allocator under stress: random allocate/free/empty_cache sequences
(hypothesis), concurrent threads, a long training loop, and the host memory
a large simulated device really costs."""
import threading

import pytest
import torch
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from torch_neuron_sim import _C
from conftest import run_python

DEVICES = [2, 3]


pytestmark = pytest.mark.usefixtures("plain_arena")  # the normal block layout: see conftest


def arena_blocks(device):
    """(offset, size, requested, allocated) of every block of every segment, in address order."""
    return [b for seg in _C._segments(device) for b in seg[3]]


def active_bytes(device):
    return torch.neuron.memory_stats(device)["active_bytes.all.current"]  # what live tensors asked for


class ArenaMachine(RuleBasedStateMachine):
    """Live tensors are the model: the allocator must agree with them at every step."""

    def __init__(self):
        super().__init__()
        self.live = []  # (tensor, device, requested bytes, fill value)
        torch.neuron.empty_cache()
        self.base_allocated = {d: active_bytes(d) for d in DEVICES}
        self.base_blocks = {d: arena_blocks(d) for d in DEVICES}
        self.next_value = 1

    def _keep(self, t, device, nbytes):
        value = self.next_value % 250 + 1
        self.next_value += 1
        t.fill_(value)
        self.live.append((t, device, nbytes, value))

    @rule(device=st.sampled_from(DEVICES),
          nbytes=st.integers(1, 1 << 20) | st.sampled_from([1, 511, 512, 513, 4096, 3 << 20]))
    def allocate(self, device, nbytes):
        self._keep(torch.empty(nbytes, dtype=torch.uint8, device=f"neuron:{device}"), device, nbytes)

    @rule(device=st.sampled_from(DEVICES), n=st.integers(1, 4096))
    def compute(self, device, n):  # outputs allocated by a kernel inside the arena
        t = (torch.ones(n, dtype=torch.int32, device=f"neuron:{device}") * 3).to(torch.uint8)
        self._keep(t, device, n)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def free(self, data):
        del self.live[data.draw(st.integers(0, len(self.live) - 1))]

    @rule()
    def empty_cache(self):
        torch.neuron.empty_cache()

    @invariant()
    def arena_agrees_with_live_tensors(self):
        for d in DEVICES:
            mine = [(t.data_ptr(), n) for t, dev, n, _ in self.live if dev == d]
            assert active_bytes(d) == self.base_allocated[d] + sum(n for _, n in mine)
            mine.sort()
            for (p0, n0), (p1, _) in zip(mine, mine[1:]):
                assert p0 + n0 <= p1, "two live blocks overlap"
            base = _C._arena_base(d)
            starts = {base + off: req for off, _, req, alloc in arena_blocks(d) if alloc}
            for p, n in mine:
                assert starts.get(p) == n, "a live tensor is not a live block of its size"
        for t, _, _, value in self.live[-3:]:  # contents survive other allocations and frees
            assert bool((t == value).all())

    def teardown(self):
        self.live.clear()
        torch.neuron.empty_cache()  # freed blocks stay cached until then
        for d in DEVICES:
            after = arena_blocks(d)
            assert after == self.base_blocks[d], "free blocks did not coalesce back"
            if not any(alloc for *_, alloc in self.base_blocks[d]):
                assert after == [] and torch.neuron.memory_reserved(d) == 0


TestArenaStateMachine = ArenaMachine.TestCase
TestArenaStateMachine.settings = settings(settings(), stateful_step_count=30)


def test_a_request_takes_the_smallest_free_range_that_fits():
    """Best fit, as the device's allocator places blocks: a request goes to
    the smallest free range that holds it, also after ranges shrank (a split)
    or grew (a freed neighbour) past one another."""
    d = DEVICES[1]
    torch.neuron.empty_cache()
    base, before = _C._arena_base(d), arena_blocks(d)
    K = 1024

    def block(nbytes):
        return torch.empty(nbytes, dtype=torch.uint8, device=f"neuron:{d}")

    def offset(t):
        return t.data_ptr() - base

    # spacer | A 8K | spacer | B 6K | spacer | C 2K | X 2K | spacer | D 3K | spacer
    t = {name: block(n * K) for name, n in [("s1", 2), ("A", 8), ("s2", 2), ("B", 6), ("s3", 2), ("C", 2),
                                           ("X", 2), ("s4", 2), ("D", 3), ("s5", 2)]}
    at = {name: offset(x) for name, x in t.items()}
    for name in "ABCD":
        del t[name]  # free ranges of 8, 6, 2 and 3 KiB
    t["7K"] = block(7 * K)
    assert offset(t["7K"]) == at["A"]  # the only range that holds it; 1 KiB of it stays free
    t["1K"] = block(K)
    assert offset(t["1K"]) == at["A"] + 7 * K  # that 1 KiB, now the smallest range
    del t["X"]  # C and X's 2 KiB merge: 4 KiB, larger than D
    t["3K"] = block(3 * K)
    assert offset(t["3K"]) == at["D"]
    t["4K"] = block(4 * K)
    assert offset(t["4K"]) == at["C"]  # not B's 6 KiB
    t.clear()
    torch.neuron.empty_cache()
    assert arena_blocks(d) == before  # everything coalesced back


def test_two_threads_allocate_and_free_concurrently():
    d = DEVICES[0]
    torch.neuron.empty_cache()
    base_allocated, base_blocks = torch.neuron.memory_allocated(d), arena_blocks(d)
    errors = []

    def worker(seed):
        g = torch.Generator().manual_seed(seed)
        try:
            held = []
            for i in range(1000):
                n = int(torch.randint(1, 1 << 16, (1,), generator=g))
                t = torch.full((n,), float(seed), device=f"neuron:{d}")
                held.append(t)
                if len(held) > 8:
                    x = held.pop(int(torch.randint(0, len(held), (1,), generator=g)))
                    assert (x == seed).all().item(), "another thread's data appeared in my tensor"
        except Exception as e:  # surfaced by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert torch.neuron.memory_allocated(d) == base_allocated
    torch.neuron.empty_cache()
    assert arena_blocks(d) == base_blocks


def test_ten_thousand_training_steps_leak_nothing():
    torch.manual_seed(0)
    dev = f"neuron:{DEVICES[1]}"
    model = torch.nn.Linear(4, 1).to(dev)  # tiny: the loop measures bookkeeping, not math
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(16, 4, device=dev), torch.randn(16, 1, device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    first = step().item()  # creates the momentum buffers
    start = torch.neuron.memory_allocated(DEVICES[1])
    for _ in range(10_000):
        loss = step()
    assert loss.item() < first
    del loss
    assert torch.neuron.memory_allocated(DEVICES[1]) == start


def test_a_24_gib_device_costs_only_the_pages_touched():
    r = run_python("""
        import torch, torch_neuron_sim
        def rss():
            with open("/proc/self/status") as f:
                return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS"))
        MiB = 2**20
        print(torch.neuron.get_device_properties(0).total_memory // 2**30)
        r0 = rss()
        x = torch.empty(20 * 2**30, dtype=torch.uint8, device="neuron")   # 20 GiB, untouched
        r1 = rss()
        x[: 64 * MiB].fill_(1)                                             # touch 64 MiB of it
        r2 = rss()
        del x
        torch.neuron.empty_cache()                                         # pages go back to the host
        r3 = rss()
        print((r1 - r0) // MiB, (r2 - r1) // MiB, (r2 - r3) // MiB)
    """, {"NEURON_SIM_POISON": "0", "NEURON_SIM_GUARD": "0"})  # poisoning would write all 20 GiB
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert lines[0] == "24"
    reserve, touched, released = map(int, lines[1].split())
    assert reserve < 8  # reserving 20 GiB costs (almost) nothing
    assert 60 <= touched <= 64 + 16  # touching 64 MiB costs 64 MiB
    assert released >= 60  # empty_cache returns them
