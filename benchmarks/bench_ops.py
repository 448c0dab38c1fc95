"""Per-op cost of the neuron device against the CPU, measured in one run.

Rows (neuron time / CPU time, best and median of interleaved batches):
  - a 1,024-element add: the per-op overhead (dispatch, aliasing, bookkeeping)
  - an MLP training step (forward, backward, SGD step): many small ops in a row
  - large ops (16M-element add, 1024x1024 matmul) and 64 MiB copies, twice:
      steady state  outputs preallocated on both sides (out=, copy_ into a
                    tensor that exists): the cost of the op itself
      first touch   a fresh output every call: adds what a new output costs.
                    The CPU allocator returns a large freed block to the OS
                    and page-faults a fresh one on first write; the arena
                    keeps its pages, so neuron comes out faster here.

Then where the MLP step's extra time goes (a table of its own, medians):
  the neuron step minus the CPU step, split by timing a third side alternately
  with the two, the neuron step with its backward on the caller's thread
  (autograd's multithreading off). PyTorch's engine runs the backward of any
  non-CPU device (CUDA, TorchNeuron, this emulator) on a per-device thread and
  the caller waits for it, while the CPU's runs on the caller's thread: the
  step minus the caller's-thread step is what that thread costs (its handoff,
  and the caches and cores the backward then runs on), the caller's-thread
  step minus the CPU step is the emulator's own cost. Beside them, the
  handoff's round trip timed on its own by the extension
  (csrc/bindings/handoff_probe.cpp): two threads, a mutex and a condition
  variable each way, as the engine's ready queues are built, each handoff
  waking a thread that sleeps; a model of the handoff, not the engine itself.

  - the bf16 MLP step with stochastic rounding on against the same step
    with it off (NEURON_RT_STOCHASTIC_ROUNDING_EN; docs/numerics.md). Aim <= 1.5x.
  - the MLP step with adaptive eager on against the same step with it off
    (both on neuron, each ending with the flush a step that reads its loss
    makes): what queuing ops into runs costs the host. Aim <= 1.10x.
  - FlexAttention (causal, B=1, H=4, S=1024, head dim 64) compiled on neuron
    against torch.compile of the same function on the CPU (PyTorch's own CPU
    FlexAttention kernel). Aim <= 1.10x. The same without a mask, no aim: the
    CPU kernel skips the key blocks a BlockMask marks empty (half of them,
    causal), the device's decomposition computes the whole score matrix, so
    the unmasked row shows what the decomposition costs on its own.

--breakdown also prints the thread switches per step on each side.

Usage: python benchmarks/bench_ops.py [--repeats N] [--threads T] [--breakdown]
"""
from __future__ import annotations

import os
import resource
import statistics

import torch

import torch_neuron_sim  # noqa: F401  (registers the device)
from timing import Row, Table, batch, cli, on_caller_thread, ratio
from torch_neuron_sim import _C

GROUP, STEP_GROUP = "ops", "ops-step"


def mlp_step(device: str, dtype: torch.dtype = torch.float32):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(device, dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64, device=device, dtype=dtype), torch.randint(0, 10, (32,), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def with_stochastic_rounding(step, on: bool):
    """`step` run with NEURON_RT_STOCHASTIC_ROUNDING_EN set to `on`: the
    variable changes (and the next op reads it) only when the other side ran last."""
    def run():
        if _C._numerics()["stochastic_rounding"] != on:
            if on:
                os.environ["NEURON_RT_STOCHASTIC_ROUNDING_EN"] = "1"
            else:
                os.environ.pop("NEURON_RT_STOCHASTIC_ROUNDING_EN", None)
            _C._numerics_reread()
        step()
    return run


def handoff_seconds(repeats: int, round_trips: int = 200) -> float:
    """The engine's device-thread round trip, median of `repeats` batches."""
    return statistics.median(_C._autograd_handoff_round_trip(round_trips) for _ in range(repeats))


def step_breakdown(neuron_step, cpu_step, repeats: int) -> Table:
    """Where the neuron step's extra time over the CPU step goes, from three
    sides timed alternately: the step as it runs, the same step with its
    backward on the caller's thread, and the CPU step. The first difference is
    what autograd's device thread costs the step, the second the emulator's;
    the engine's handoff timed alone (a model of it) is shown beside them."""
    caller_step = on_caller_thread(neuron_step)
    sides = (neuron_step, caller_step, cpu_step)
    times = [[] for _ in sides]
    for fn in sides:
        fn()
    for _ in range(repeats):
        for fn, t in zip(sides, times):
            t.append(batch(fn, 50))
    neuron, caller, cpu = (statistics.median(t) for t in times)
    handoff = handoff_seconds(repeats)

    def us(seconds, of=None):
        return f"{seconds * 1e6:,.1f} µs" + (f" ({seconds / of:.0%} of the CPU step)" if of else "")
    table = Table(STEP_GROUP, ["MLP step (medians)", "neuron step", "backward on the caller's thread", "CPU step",
                               "neuron - CPU", "autograd's device thread", "handoff alone (round trip)",
                               "remainder: the emulator"])
    table.add("64-128-128-10, batch 32", us(neuron), us(caller), us(cpu), us(neuron - cpu),
              us(neuron - caller, cpu), us(handoff), us(caller - cpu, cpu))
    return table


def adaptive(step, on: bool):
    """The step with adaptive eager on or off, ending with a flush (on: the
    run of queued ops launches, as when a step reads its loss)."""
    from torch_neuron_sim import adaptive_eager

    def run():
        adaptive_eager.enable(on)
        step()
        adaptive_eager.flush()
        adaptive_eager.enable(False)
    return run


def flex_attention_pair(causal: bool = True):
    """(neuron, cpu) callables: FlexAttention (causal, or no mask) of one
    batch, 4 heads, S=1024, head dim 64, each compiled for its device."""
    import torch._dynamo
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 16)
    fns = []
    for device, backend in (("neuron", "neuron"), ("cpu", "inductor")):
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(1, 4, 1024, 64, generator=g).to(device) for _ in range(3))
        mask = create_block_mask(lambda b, h, qi, kv: qi >= kv, None, None, 1024, 1024, device=device) if causal \
            else None
        fn = torch.compile(lambda q, k, v, mask=mask: flex_attention(q, k, v, block_mask=mask), backend=backend)
        fn(q, k, v)  # compile
        fns.append(lambda fn=fn, q=q, k=k, v=v: fn(q, k, v))
    return fns


def switches_per_call(fn, calls: int = 200) -> float:
    """Voluntary thread switches (waits) per call: 0 for a step on one thread."""
    fn()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
    for _ in range(calls):
        fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - before) / calls


def breakdown() -> None:
    neuron, cpu = mlp_step("neuron"), mlp_step("cpu")
    print(f"thread switches per MLP step: neuron {switches_per_call(neuron):.2f}, CPU {switches_per_call(cpu):.2f}")


def run(repeats: int = 21) -> list[Row | Table]:
    rows = []
    a, b = torch.randn(1024), torch.randn(1024)
    na, nb = a.to("neuron"), b.to("neuron")
    # Aim 1.15x: the op path is one pass over the call's arguments (docs/architecture.md).
    rows.append(ratio(GROUP, "add, 1,024 floats (per-op overhead)", lambda: na + nb, lambda: a + b,
                      1000, repeats * 2, 1.15))
    neuron_step, cpu_step = mlp_step("neuron"), mlp_step("cpu")
    rows.append(ratio(GROUP, "MLP training step (64-128-128-10, batch 32)", neuron_step, cpu_step,
                      50, repeats, 1.15))
    rows.append(step_breakdown(neuron_step, cpu_step, repeats))

    a, b = torch.randn(16 << 20), torch.randn(16 << 20)
    na, nb = a.to("neuron"), b.to("neuron")
    out, nout = torch.empty_like(a), torch.empty_like(na)
    rows.append(ratio(GROUP, "add, 16M floats, steady state", lambda: torch.add(na, nb, out=nout),
                      lambda: torch.add(a, b, out=out), 3, repeats, 1.05))
    rows.append(ratio(GROUP, "add, 16M floats, first touch", lambda: na + nb, lambda: a + b, 3, repeats, 1.05))
    del out, nout

    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    na, nb = a.to("neuron"), b.to("neuron")
    out, nout = torch.empty_like(a), torch.empty_like(na)
    rows.append(ratio(GROUP, "matmul 1024x1024, steady state", lambda: torch.mm(na, nb, out=nout),
                      lambda: torch.mm(a, b, out=out), 3, repeats, 1.05))
    rows.append(ratio(GROUP, "matmul 1024x1024, first touch", lambda: na @ nb, lambda: a @ b, 3, repeats, 1.05))

    on_step, off_step = mlp_step("neuron"), mlp_step("neuron")
    rows.append(ratio(GROUP, "MLP step, adaptive eager on / off (host time)", adaptive(on_step, True),
                      adaptive(off_step, False), 50, repeats, 1.10))
    # Stochastic rounding (docs/numerics.md): every bf16 result computed in fp32 and rounded. Aim 1.5x.
    sr_on = with_stochastic_rounding(mlp_step("neuron", torch.bfloat16), True)
    sr_off = with_stochastic_rounding(mlp_step("neuron", torch.bfloat16), False)
    rows.append(ratio(GROUP, "MLP step bf16, stochastic rounding on / off", sr_on, sr_off, 50, repeats, 1.5))
    sr_off()
    rows.append(ratio(GROUP, "FlexAttention S=1024 causal, compiled neuron / compiled CPU", *flex_attention_pair(),
                      3, repeats, 1.10))
    rows.append(ratio(GROUP, "FlexAttention S=1024 no mask, compiled neuron / compiled CPU",
                      *flex_attention_pair(causal=False), 3, repeats, None))

    host = torch.randn(16 << 20)  # 64 MiB
    dev, host_out, cpu_out = host.to("neuron"), torch.empty_like(host), torch.empty_like(host)
    # Copies against a CPU copy of the same bytes; aim: at least 0.9x its speed.
    rows.append(ratio(GROUP, "copy 64 MiB host->device, steady state", lambda: dev.copy_(host),
                      lambda: cpu_out.copy_(host), 3, repeats, 1 / 0.9))
    rows.append(ratio(GROUP, "copy 64 MiB device->host, steady state", lambda: host_out.copy_(dev),
                      lambda: cpu_out.copy_(host), 3, repeats, 1 / 0.9))
    rows.append(ratio(GROUP, "copy 64 MiB host->device, first touch", lambda: host.to("neuron"),
                      lambda: host.clone(), 3, repeats, 1 / 0.9))
    rows.append(ratio(GROUP, "copy 64 MiB device->host, first touch", lambda: dev.to("cpu"),
                      lambda: host.clone(), 3, repeats, 1 / 0.9))
    return rows


def main():
    args = cli(21, breakdown=(bool, False, "also: the thread switches per MLP step"))
    run(args.repeats)
    if args.breakdown:
        breakdown()


if __name__ == "__main__":
    main()
