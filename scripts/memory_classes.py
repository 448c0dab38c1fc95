"""docs/memory.md shows how the caching allocator rounds requests, which pool
they go to and which segment a new block takes, and the out-of-memory error
of a fragmented device. This script asks the allocator itself
(`torch_neuron_sim._C._round_size`) for a row per example request, runs the
out-of-memory scenario in a fresh process, and writes both between the
page's markers, so the page shows what the code does;
tests/memory/test_caching_allocator.py fails when they no longer match.

Usage: python scripts/memory_classes.py          rewrite the page's table
       python scripts/memory_classes.py --print  print the table only
"""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "memory.md"
START = "<!-- size classes: start (scripts/memory_classes.py writes this) -->"
END = "<!-- size classes: end -->"
OOM_START = "<!-- oom example: start (scripts/memory_classes.py writes this) -->"
OOM_END = "<!-- oom example: end -->"
# 64 MiB allowed; 21 MiB of 3 MiB tensors freed (two cached 20 MB segments),
# 40 MiB allocated (the cache is freed to make room), then 30 MiB more.
OOM_SCENARIO = """
import torch, torch_neuron_sim
torch.neuron.set_per_process_memory_fraction(64 * 2**20 / torch.neuron.get_device_properties(0).total_memory)
junk = [torch.empty(3 * 2**20, dtype=torch.uint8, device="neuron") for _ in range(7)]
del junk
big = torch.empty(40 * 2**20, dtype=torch.uint8, device="neuron")
try:
    torch.empty(30 * 2**20, dtype=torch.uint8, device="neuron")
except torch.OutOfMemoryError as e:
    print(e)
"""
KiB, MiB = 2**10, 2**20
REQUESTS = (1, 256, 257, 1000, 1025, 3000, 5000, 100 * KiB + 1, 700 * KiB, MiB - 1, MiB, 3 * MiB + 1,
            9 * MiB, 11 * MiB, 16 * MiB - 1, 16 * MiB + 1, 100 * MiB + 3)


def _size(n: int) -> str:
    """Whole KiB or MiB in those units (at most two decimals), anything else in bytes."""
    for unit, scale in (("MiB", MiB), ("KiB", KiB)):
        if n >= scale and (n * 100) % scale == 0:
            return f"{n / scale:.2f}".rstrip("0").rstrip(".") + f" {unit}"
    return f"{n:,} B"


def table() -> str:
    from torch_neuron_sim import _C

    rows = ["| request | block (size class) | pool | new segment |", "|---|---|---|---|"]
    for n in REQUESTS:
        block, pool, segment = _C._round_size(n)
        rows.append(f"| {_size(n)} | {_size(block)} | {pool} | {_size(segment)} |")
    return "\n".join(rows) + "\n"


def oom_example() -> str:
    import subprocess

    r = subprocess.run([sys.executable, "-c", OOM_SCENARIO], capture_output=True, text=True, timeout=600,
                       check=True)
    message = r.stdout.strip()
    return "```\n" + textwrap.fill(message, width=92, break_long_words=False, break_on_hyphens=False) + "\n```\n"


def _between(text: str, start: str, end: str) -> str:
    return text[text.index(start) + len(start):text.index(end)].strip("\n") + "\n"


def in_doc() -> str:
    return _between(DOC.read_text(), START, END)


def oom_in_doc() -> str:
    return _between(DOC.read_text(), OOM_START, OOM_END)


def _replace(text: str, start: str, end: str, body: str) -> str:
    head, rest = text.split(start)
    return head + start + "\n" + body + end + rest.split(end, 1)[1]


def main() -> None:
    t = table()
    if "--print" in sys.argv:
        print(t, end="")
        print(oom_example(), end="")
        return
    text = _replace(DOC.read_text(), START, END, t)
    DOC.write_text(_replace(text, OOM_START, OOM_END, oom_example()))


if __name__ == "__main__":
    main()
