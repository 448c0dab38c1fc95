"""What collecting the migration report costs per op, as ratios measured in
the same run (never absolute timings): the op on neuron inside
`with torch_neuron_sim.report()` against the same op on neuron without one.

While a report is active every op reads the clock twice (its time by
op) and adds a device event to the estimated timeline (the unboxed kernels
of the hottest native ops do both themselves), and every allocation and free
an entry in the memory history; each batch here also pays one report's start
and stop: one call into C++ at each end (the counters, the recording switched
on or off; at stop the timeline summed up and the memory history taken for the
HBM chart's points), all of it Python data only when the report's data is
read, which a batch here never does. After a batch of large ops both ends run
with the host's caches cold (the ops streamed their megabytes through them):
the large rows measure that too, as a report around a training step meets it. A fallback op also pays one call into
Python and a stack walk to record its source line. With no report active it is all one relaxed atomic load per op
(docs/migration-report.md, "How it is collected, and what it costs").

Usage: python benchmarks/bench_report.py [--repeats N] [--threads T]
"""
from __future__ import annotations

import torch

import torch_neuron_sim
from timing import Row, cli, ratio

GROUP = "report"
# Aims: a report may cost an op of a few microseconds half its time again, one
# over 1 MiB (where the op's own work dominates) at most 5%.
SMALL_AIM, LARGE_AIM = 1.5, 1.05


def run(repeats: int = 15) -> list[Row]:
    torch_neuron_sim.tracking.logger.setLevel("ERROR")
    x64 = torch.randn(64, 64, dtype=torch.float64).to("neuron")
    small, large = torch.randn(1024).to("neuron"), torch.randn(1 << 20).to("neuron")
    cases = [
        ("add, 1,024 floats (native)", lambda: torch.add(small, small), 2000, SMALL_AIM),
        ("add, 1M floats (native)", lambda: torch.add(large, large), 50, LARGE_AIM),
        ("mm 64x64 float64 (native, 64-bit rule)", lambda: torch.mm(x64, x64), 1000, SMALL_AIM),
        ("cumprod, 1,024 floats (fallback)", lambda: torch.cumprod(small, 0), 2000, None),
        ("cumprod, 1M floats (fallback)", lambda: torch.cumprod(large, 0), 50, None),
    ]
    rows = []
    for name, fn, inner, aim in cases:
        # "neuron" is the op inside an active report, "cpu" the same op on neuron without one.
        rows.append(ratio(GROUP, f"{name}: report on / off", lambda fn=fn, inner=inner: _in_report(fn, inner),
                          lambda fn=fn, inner=inner: _plain(fn, inner), 1, repeats, aim, calls_per_fn=inner))
    return rows


def _plain(fn, inner):
    for _ in range(inner):
        fn()


def _in_report(fn, inner):
    with torch_neuron_sim.report():
        for _ in range(inner):
            fn()


def main():
    run(cli(15).repeats)


if __name__ == "__main__":
    main()
