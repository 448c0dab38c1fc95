"""Where a fresh build of the extension spends its time: builds torch_neuron_sim._C and
_kineto from scratch into a scratch directory, exactly as `make ext` does (setup.py,
BuildExtension, ninja, MAX_JOBS=2) but without ccache, and records the CPU time (user + sys)
of every compiler process. CPU time, not wall time: on a shared machine the wall time of a
unit depends on what else runs, its CPU time hardly does.

The compiler is reached through a shim named c++ put first on PATH, which runs the real
compiler and appends one line per process (file, user s, sys s) to a log; torch's own
ccache wrapper is turned off (TORCH_NO_COMPILER_WRAPPER=1) so every unit compiles.

With --headers it instead counts the lines a file compiles when it includes one torch header
(preprocessed, blank lines left out): a measure of what parsing that header costs that does not
depend on the machine's load. It takes the flags from the last build's precompiled header.

Usage: python scripts/build_profile.py            rewrite docs/building.md's table
       python scripts/build_profile.py --print    print the table only
       python scripts/build_profile.py --headers  rewrite docs/building.md's header table
       python scripts/build_profile.py --from-log LOG   the table of a log the shim wrote in another build
       python scripts/build_profile.py --wrap LOG COMPILER ARGS...   (the shim's own call)
"""
from __future__ import annotations

import json
import os
import re
import shlex
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
HEADERS_START = "<!-- header sizes: start (scripts/build_profile.py --headers writes this) -->"
HEADERS_END = "<!-- header sizes: end -->"
# From one c10 header to all of torch's C++ API, with what the extension's files include.
HEADERS = ["c10/core/Device.h", "c10/core/TensorImpl.h", "ATen/core/Tensor.h", "ATen/core/dispatch/Dispatcher.h",
           "torch/library.h", "ATen/ops/empty.h", "aten/precompiled.h", "torch/csrc/utils/pybind.h",
           "ATen/ATen.h", "torch/extension.h"]


def wrap(log: str, argv: list[str]) -> int:
    """Runs one compiler process and logs its CPU time: the unit it compiled (or 'link')."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv)
    _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    sources = [a for a in argv if a.endswith((".cpp", ".h"))]
    if "-shared" in argv:
        what = "link " + next((Path(a).name for a in argv if a.endswith(".so")), "?")
    elif sources and "-c" in argv and f"{os.sep}unity{os.sep}" in sources[-1]:  # a group setup.py wrote
        members = re.findall(r'^#include "(.+)\.cpp"', Path(sources[-1]).read_text(), re.M)
        what = f"csrc/{os.path.dirname(members[0])}/{{{', '.join(os.path.basename(m) for m in members)}}}"
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


def table(rows: list[dict], wall: float | None, top: int = 15, what: str = "Fresh build without ccache") -> str:
    rows = sorted(rows, key=lambda r: -(r["user"] + r["sys"]))
    cpu = [r["user"] + r["sys"] for r in rows]
    total = sum(cpu)
    units = [r for r in rows if not r["unit"].startswith("link")]
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0]
    out = [f"{what}, {len(units)} units, {os.cpu_count()} CPUs, {os.environ.get('MAX_JOBS', '2')} jobs, "
           f"{when}, load average {load:.1f} when written:",
           f"**{total:.0f} s of CPU** (user + sys)"
           + (f", {wall:.0f} s wall (the wall time depends on the machine's load)." if wall else "."),
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


def header_sizes() -> str:
    """Preprocessed lines of a file that includes only one header, for each of HEADERS."""
    stamps = sorted(ROOT.glob("build/temp.*/precompiled/aten/precompiled.h.gch.command"))
    if not stamps:
        raise SystemExit("no precompiled header's command in build/: run make ext first")
    command = shlex.split(stamps[-1].read_text())
    cut = command.index("-x")  # ... -x c++-header SOURCE -o TARGET post_cflags
    compiler = [a for a in command[:cut] if a != "ccache"]
    flags = [a for a in compiler[1:] if not a.startswith("-I") or "precompiled" not in a]
    flags = [a for a in flags if a != "-c"] + command[cut + 5:]
    out = ["| a file that includes only | lines it compiles |", "|---|---:|"]
    for header in HEADERS:
        pre = subprocess.run([compiler[0], *flags, "-x", "c++", "-E", "-P", "-"], input=f"#include <{header}>\n",
                             capture_output=True, text=True, check=True).stdout
        out.append(f"| `{header}` | {sum(1 for line in pre.splitlines() if line.strip()):,} |")
    return "\n".join(out)


def write_block(start: str, end: str, text: str) -> None:
    page = DOC.read_text()
    if start not in page or end not in page:
        raise SystemExit(f"{DOC} has no markers {start!r} ... {end!r}")
    head, rest = page.split(start, 1)
    DOC.write_text(head + start + "\n" + text + "\n" + end + rest.split(end, 1)[1])


def main(argv: list[str]) -> int:
    if argv[:1] == ["--wrap"]:
        return wrap(argv[1], argv[2:])
    if "--headers" in argv:
        text = header_sizes()
        if "--print" not in argv:
            write_block(HEADERS_START, HEADERS_END, text)
        print(text)
        return 0
    if "--from-log" in argv:  # a log the shim wrote during another build (a clone's make setup)
        log = Path(argv[argv.index("--from-log") + 1])
        rows, wall = [json.loads(line) for line in log.read_text().splitlines()], None
        for r in rows:
            r["unit"] = re.sub(r"^(\.\./)+.*?(?=csrc/)", "", r["unit"])
    else:
        rows, wall = profile()
    text = table(rows, wall, what="A fresh clone's `make setup` with ccache disabled" if wall is None
                 else "Fresh build without ccache")
    if "--print" in argv:
        print(text)
        if "--json" in argv:
            print(json.dumps(rows))
        return 0
    write_block(START, END, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
