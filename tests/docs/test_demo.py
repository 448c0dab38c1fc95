"""`make demo`'s first half (examples/demo.py), as a new user runs it: the
CNN's loss visibly falls over its steps, and the neuron run equals the CPU run."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_learns_and_equals_the_cpu_run():
    r = subprocess.run([sys.executable, "examples/demo.py"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    m = re.search(r"loss: first ([\d.]+), last ([\d.]+); largest difference from the CPU run: ([\d.e+-]+)", r.stdout)
    assert m, r.stdout
    first, last, diff = map(float, m.groups())
    assert last < first / 4, r.stdout  # learning, not noise around ln(10)
    assert diff == 0.0, r.stdout
    curve = [float(x) for x in re.findall(r"\d+:([\d.]+)", r.stdout.split("loss by step:", 1)[1].splitlines()[0])]
    assert curve[0] == round(first, 3) and curve == sorted(curve, reverse=True), curve  # falls at every point shown
