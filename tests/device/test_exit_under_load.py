"""Programs that end right after a backward on `neuron` exit with status 0
when many run at once: scripts/stress_exit.py runs the README's example and
the demo's training loop in fresh interpreters, two at a time. `make test`
runs 10 of each; `make test-deep` (NEURON_SIM_STRESS_RUNS=200) 200 of each."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_example_and_the_demo_loop_exit_cleanly_under_load(tmp_path):
    runs = int(os.environ.get("NEURON_SIM_STRESS_RUNS", "10"))
    r = subprocess.run([sys.executable, "scripts/stress_exit.py", "--runs", str(runs), "--jobs", "2",
                        "--keep", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120 * runs)
    kept = {p.name: p.read_text()[-3000:] for p in tmp_path.glob("*.log")}
    assert r.returncode == 0, (r.stdout, r.stderr, kept)
    assert r.stdout.splitlines() == [f"stress-exit: readme: {runs} runs, 0 non-zero exits",
                                     f"stress-exit: demo_loop: {runs} runs, 0 non-zero exits"]
