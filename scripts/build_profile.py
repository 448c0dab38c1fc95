"""Where a fresh build of the extension spends its time: builds torch_neuron_sim._C and
_kineto from scratch into a scratch directory, exactly as `make ext` does (setup.py,
BuildExtension, ninja, MAX_JOBS=2) but without ccache, and records the CPU time (user + sys)
of every compiler process. CPU time, not wall time: on a shared machine the wall time of a
unit depends on what else runs, its CPU time hardly does.

The compiler is reached through a shim named c++ put first on PATH, which runs the real
compiler and appends one line per process (file, user s, sys s) to a log; torch's own
ccache wrapper is turned off (TORCH_NO_COMPILER_WRAPPER=1) so every unit compiles.

Usage: python scripts/build_profile.py            rewrite docs/building.md's table
       python scripts/build_profile.py --print    print the table only
       python scripts/build_profile.py --wrap LOG COMPILER ARGS...   (the shim's own call)
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "building.md"
START = "<!-- build profile: start (scripts/build_profile.py writes this) -->"
END = "<!-- build profile: end -->"


def wrap(log: str, argv: list[str]) -> int:
    """Runs one compiler process and logs its CPU time: the unit it compiled (or 'link')."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv)
    _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    sources = [a for a in argv if a.endswith((".cpp", ".h"))]
    if "-shared" in argv:
        what = "link " + next((Path(a).name for a in argv if a.endswith(".so")), "?")
    elif sources and "-c" in argv:
        what = os.path.relpath(sources[-1], ROOT)
    else:  # version probes and the like
        return code
    with open(log, "a") as f:
        f.write(json.dumps({"unit": what, "user": usage.ru_utime, "sys": usage.ru_stime,
                            "wall": time.perf_counter() - t0, "ok": code == 0}) + "\n")
    return code


def profile() -> tuple[list[dict], float]:
    """One fresh build, without ccache; the logged compiler processes and the build's wall time."""
    with tempfile.TemporaryDirectory(prefix="build_profile_") as tmp:
        tmp = Path(tmp)
        log = tmp / "log.jsonl"
        shim = tmp / "bin" / "c++"
        shim.parent.mkdir()
        real = "/usr/bin/c++"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" --wrap "{log}" {real} "$@"\n')
        shim.chmod(0o755)
        env = dict(os.environ, PATH=f"{shim.parent}:{os.environ['PATH']}", TORCH_NO_COMPILER_WRAPPER="1",
                   CCACHE_DISABLE="1", MAX_JOBS=os.environ.get("MAX_JOBS", "2"), TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        env.pop("CXX", None)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--build-temp", str(tmp / "temp"),
                        "--build-lib", str(tmp / "lib")], cwd=ROOT, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        rows = [json.loads(line) for line in log.read_text().splitlines()]
    failed = [r["unit"] for r in rows if not r["ok"]]
    if failed:
        raise RuntimeError("compiler processes failed: " + ", ".join(failed))
    return rows, wall


def table(rows: list[dict], wall: float, top: int = 15) -> str:
    rows = sorted(rows, key=lambda r: -(r["user"] + r["sys"]))
    cpu = [r["user"] + r["sys"] for r in rows]
    total = sum(cpu)
    units = [r for r in rows if not r["unit"].startswith("link")]
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0]
    out = [f"Fresh build without ccache, {len(units)} units, {os.cpu_count()} CPUs, {os.environ.get('MAX_JOBS', '2')} jobs, "
           f"{when}, load average {load:.1f} at the end:",
           f"**{total:.0f} s of CPU** (user + sys), {wall:.0f} s wall (the wall time depends on the machine's load).",
           "",
           "| compiler process | CPU s | share |",
           "|---|---:|---:|"]
    for r, c in zip(rows[:top], cpu[:top]):
        out.append(f"| `{r['unit']}` | {c:.1f} | {100 * c / total:.1f} % |")
    rest = cpu[top:]
    if rest:
        out.append(f"| the other {len(rest)} | {sum(rest):.1f} | {100 * sum(rest) / total:.1f} % |")
    out.append(f"| median unit | {sorted(r['user'] + r['sys'] for r in units)[len(units) // 2]:.1f} | |")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--wrap"]:
        return wrap(argv[1], argv[2:])
    rows, wall = profile()
    text = table(rows, wall)
    if "--print" in argv:
        print(text)
        if "--json" in argv:
            print(json.dumps(rows))
        return 0
    page = DOC.read_text()
    if START not in page or END not in page:
        raise SystemExit(f"{DOC} has no markers {START!r} ... {END!r}")
    head, rest = page.split(START, 1)
    DOC.write_text(head + START + "\n" + text + "\n" + END + rest.split(END, 1)[1])
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
