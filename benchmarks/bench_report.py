"""What collecting the migration report costs per op, as ratios measured in
the same run (never absolute timings):

    python benchmarks/bench_report.py

  neuron / cpu            the op on neuron against the same op on CPU
  report / neuron         the op on neuron inside `with torch_neuron_sim.report()`
                          against the same op on neuron without a report

Native ops pay nothing for the report (their counters and the compile-cache
signature run anyway); a fallback op pays one call into Python and a stack
walk to record its source line, only while a report is active.
"""
import contextlib
import timeit

import torch

import torch_neuron_sim


def interleaved(fns, number, rounds=15):
    """Best per-call time of each fn, measured in alternation so that load
    changes on a shared machine hit all of them alike."""
    best = [float("inf")] * len(fns)
    for f in fns:
        f(1)
    for _ in range(rounds):
        for i, f in enumerate(fns):
            best[i] = min(best[i], f(number) / number)
    return best


_nothing = contextlib.nullcontext


def main():
    torch.set_num_threads(1)
    torch_neuron_sim.tracking.logger.setLevel("ERROR")
    cases = []
    for n in (1024, 1 << 20):
        a, b = torch.randn(n), torch.randn(n)
        cases.append((f"add, {n:,} floats (native)", lambda x, y: torch.add(x, y), (a, b), 2000 if n < 10**5 else 50))
        cases.append((f"cumprod, {n:,} floats (fallback)", lambda x, y: torch.cumprod(x, 0), (a, b),
                      2000 if n < 10**5 else 50))
    x64 = torch.randn(64, 64, dtype=torch.float64)
    cases.append(("mm 64x64 float64 (native, 64-bit rule)", lambda x, y: torch.mm(x, y), (x64, x64), 2000))
    print(f"{'op':<42}{'neuron/cpu':>12}{'report/neuron':>15}")
    for name, fn, args, number in cases:
        dev = [t.to("neuron") for t in args]

        def timed(inputs, report=False):
            def run(n):
                with torch_neuron_sim.report() if report else _nothing():
                    return timeit.timeit(lambda: fn(*inputs), number=n)
            return run

        cpu, neuron, reported = interleaved([timed(args), timed(dev), timed(dev, report=True)], number)
        print(f"{name:<42}{neuron / cpu:>11.2f}x{reported / neuron:>14.2f}x")

if __name__ == "__main__":
    main()
