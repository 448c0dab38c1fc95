"""A/B of two builds of the extension in one sitting: is the per-op path of
build B (this checkout) as fast as build A (another checkout with its own
venv and built extension: `git worktree add <dir> <commit>`, then `make -C <dir>
setup`)?

One process cannot load two builds of `_C`, so the two builds' processes
alternate, round after round: load from other processes hits both alike.
Each process times, on neuron only, the rows a change to the op path moves:
the 1,024-float add (per-op overhead) and the MLP training step (many small
ops, backward on the device thread). A round gives each build's best batch;
the verdict reads the median over rounds of B's time / A's time.

Usage: python benchmarks/ab_builds.py --baseline DIR [--rounds N] [--label TEXT] [--write FILE]
`--write` adds the result as a JSON record to FILE (benchmarks/ab/*.json keeps
the A/Bs a ratchet reset or a per-op change relies on)."""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Runs inside each build's own interpreter (its venv, its extension).
CHILD = r"""
import json, sys, time, torch
import torch_neuron_sim  # noqa: F401
torch.set_num_threads(1)
def best(fn, inner, batches):
    fn()
    out = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        out.append((time.perf_counter() - t0) / inner)
    return min(out)
a, b = torch.randn(1024).to("neuron"), torch.randn(1024).to("neuron")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                            torch.nn.ReLU(), torch.nn.Linear(128, 10)).to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 64, device="neuron"), torch.randint(0, 10, (32,), device="neuron")
def step():
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
print(json.dumps({"add": best(lambda: a + b, 1000, 7), "mlp": best(step, 50, 5)}))
"""

ROWS = {"add": "add, 1,024 floats (per-op overhead)", "mlp": "MLP training step (64-128-128-10, batch 32)"}


def measure(checkout: Path) -> dict[str, float]:
    python = checkout / ".venv" / "bin" / "python"
    env = dict(os.environ, PYTHONPATH=str(checkout))
    out = subprocess.run([str(python), "-c", CHILD], cwd=checkout, env=env, check=True,
                         capture_output=True, text=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def commit_of(checkout: Path) -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True,
                          text=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", type=Path, required=True, help="checkout of build A (built, with .venv)")
    ap.add_argument("--candidate", type=Path, default=ROOT, help="checkout of build B (default: this one)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--label", default="", help="what the two builds differ by")
    ap.add_argument("--write", type=Path, help="append the result to this JSON file")
    args = ap.parse_args()
    a_dir, b_dir = args.baseline.resolve(), args.candidate.resolve()
    runs: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    for r in range(args.rounds):
        # Alternate which build goes first, so neither always follows the other.
        order = (("A", a_dir), ("B", b_dir)) if r % 2 == 0 else (("B", b_dir), ("A", a_dir))
        for side, checkout in order:
            runs[side].append(measure(checkout))
    result = {"date": datetime.date.today().isoformat(), "label": args.label,
              "A": commit_of(a_dir), "B": commit_of(b_dir), "rounds": args.rounds,
              "load_average": os.getloadavg()[0], "rows": {}}
    print(f"A = {result['A']}  B = {result['B']}  {args.rounds} rounds, load {result['load_average']:.1f}")
    for key, name in ROWS.items():
        a = [run[key] for run in runs["A"]]
        b = [run[key] for run in runs["B"]]
        per_round = [y / x for x, y in zip(a, b)]
        row = {"A_median_us": statistics.median(a) * 1e6, "B_median_us": statistics.median(b) * 1e6,
               "B_over_A_median": statistics.median(per_round),
               "B_over_A_range": [min(per_round), max(per_round)]}
        result["rows"][name] = row
        print(f"{name:<46} A {row['A_median_us']:9.1f} us   B {row['B_median_us']:9.1f} us   "
              f"B/A median {row['B_over_A_median']:.3f} (rounds {min(per_round):.3f}-{max(per_round):.3f})")
    if args.write:
        records = json.loads(args.write.read_text()) if args.write.exists() else []
        records.append(result)
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(json.dumps(records, indent=1) + "\n")


if __name__ == "__main__":
    main()
