"""Exit under load: the README's example and the demo's training loop, each
run many times in fresh interpreters, a few at a time, counting the runs that
end with a non-zero status (an abort at exit is -6). The output of every
failed run is kept in --keep, named after the program and the run.

A program whose last line ran a backward on `neuron` could abort after that
line when autograd's device thread freed the finished backward while Python
finalized; torch_neuron_sim's atexit drain (torch_neuron_sim/devices/
autograd_exit.py) ends that. This target is its evidence at scale.

Usage: python scripts/stress_exit.py [--runs N] [--jobs J] [--keep DIR]
Exits 1 when any run failed; prints one summary line per program.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The demo's training loop as a program of its own (examples/demo.py's train,
# on neuron only): its last line returns from a loop that ran backwards.
DEMO_LOOP = """
import sys
sys.path.insert(0, "examples")
import logging, torch, torch_neuron_sim
from demo import Net, train
logging.getLogger("torch_neuron_sim").setLevel(logging.ERROR)
torch.manual_seed(0)
losses, _ = train(Net(), "neuron", steps=5)
print(len(losses))
"""


def readme_example() -> str:
    """The README's first Python block, as a user copies it."""
    return re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)


def programs() -> dict[str, str]:
    return {"readme": readme_example(), "demo_loop": DEMO_LOOP}


def run_once(name: str, code: str, index: int, keep: Path, timeout: int) -> bool:
    """One run in a fresh interpreter; a failure's output goes to keep/."""
    try:
        r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        status, out, err = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        status, out, err = "timeout", str(e.stdout or ""), str(e.stderr or "")
    if status == 0:
        return True
    keep.mkdir(parents=True, exist_ok=True)
    (keep / f"{name}-{index}.log").write_text(f"exit status: {status}\n--- stdout\n{out}\n--- stderr\n{err}")
    return False


def stress(runs: int, jobs: int, keep: Path, timeout: int = 300) -> dict[str, int]:
    """Runs every program `runs` times, `jobs` at a time (interleaved, so the
    programs load each other); returns the failures per program."""
    tasks = [(name, code, i) for i in range(runs) for name, code in programs().items()]
    with ThreadPoolExecutor(jobs) as pool:
        ok = list(pool.map(lambda t: run_once(*t, keep, timeout), tasks))
    failures = {name: 0 for name in programs()}
    for (name, _, _), passed in zip(tasks, ok):
        failures[name] += not passed
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="runs of each program (default 200)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2)")
    parser.add_argument("--keep", type=Path, default=ROOT / "build" / "stress-exit",
                        help="where a failed run's output is kept (default build/stress-exit)")
    args = parser.parse_args()
    failures = stress(args.runs, args.jobs, args.keep)
    for name, failed in failures.items():
        print(f"stress-exit: {name}: {args.runs} runs, {failed} non-zero exits")
    if any(failures.values()):
        print(f"stress-exit: the failed runs' output is in {args.keep}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
