"""`make test TORCH=<version> [TORCH_PYTHON=<X.Y>]`: the extension built and the suite
run against another torch than the default venv's, without touching the default build.

- its own venv, .venv-torch<version>[-py<X.Y>]: torch==<version> and the test extras
  of pyproject.toml (pip takes what the machine's configuration offers: a CPU build
  from a find-links directory or a CPU index, PyPI's CUDA build otherwise, which runs on
  the CPU too), plus an editable install of the package for its entry points (the
  backend's autoload, the `neuron` compile backend, the pytest plugin);
- its own build directory, build-torch<version>[-py<X.Y>]/ (ninja: later runs recompile
  only changed files; ccache shares unchanged objects with other checkouts);
- the package copied with that build's extension into <build dir>/site, first on the
  path (PYTHONPATH, and PYTHONSAFEPATH so the checkout's own package, built for the
  default torch, is never the one imported); the first check proves it.

Usage: python scripts/test_torch_version.py --torch 2.14.1 [--python 3.12] [-- PYTEST_ARGS...]
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def interpreter(version: str) -> str:
    """A Python of that X.Y (or a path to one): on PATH, or among pyenv's versions."""
    if os.path.sep in version:
        return version
    found = shutil.which(f"python{version}")
    if found:
        return found
    pyenv = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}")))
    if pyenv:
        return pyenv[-1]
    sys.exit(f"test_torch_version: no python{version} found (on PATH or under ~/.pyenv/versions)")


def requirements(torch_version: str) -> list[str]:
    """torch at that version, the build's tools and pyproject's test extras: one list, so the
    venv follows pyproject.toml when its extras change."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    build = [r for r in project["build-system"]["requires"] if not r.startswith("torch")]
    deps = [r for r in project["project"]["dependencies"] if not r.startswith("torch")]
    return [f"torch=={torch_version}", *build, *deps, *project["project"]["optional-dependencies"]["test"], "ninja"]


def run(cmd: list, **kw) -> None:
    print("+ " + " ".join(map(str, cmd)), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True, **kw)


def venv_for(name: str, python: str, reqs: list[str]) -> Path:
    venv = ROOT / f".venv-{name}"
    py = venv / "bin" / "python"
    if not py.exists():
        run([python, "-m", "venv", str(venv)])
    stamp = venv / ".torch-neuron-sim-requirements"
    wanted = "\n".join(reqs)
    if not stamp.exists() or stamp.read_text() != wanted:
        run([str(py), "-m", "pip", "install", "-q", *reqs])
        stamp.write_text(wanted)
    # The editable install gives the venv the package's entry points; the extension it would
    # find in the checkout is the default torch's, which is why the tests import the copy below.
    run([str(py), "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "-e", "."],
        env=dict(os.environ, TORCH_NEURON_SIM_NO_EXT="1"))
    return py


def build(py: Path, out: Path) -> float:
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    env.setdefault("MAX_JOBS", "2")
    t0 = time.monotonic()
    run([str(py), "setup.py", "-q", "build_ext", "--build-temp", str(out / "temp"), "--build-lib", str(out / "lib")],
        env=env)
    return time.monotonic() - t0


def site_with_build(out: Path) -> Path:
    site = out / "site"
    shutil.rmtree(site, ignore_errors=True)
    shutil.copytree(ROOT / "torch_neuron_sim", site / "torch_neuron_sim",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    for so in (out / "lib" / "torch_neuron_sim").glob("*.so"):
        shutil.copy2(so, site / "torch_neuron_sim" / so.name)
    return site


FIGURES = ROOT / "docs" / "torch-versions.md"
_HEADER = """# Torch versions: the last run of each

Written by `scripts/test_torch_version.py` at the end of each run of `make test TORCH=<version>`
(one row per venv, the newest run's); nothing here is typed by hand. Disk is what the venv and
the build directory take; times are wall-clock on the machine of that run, under whatever load
it had. `build s` is that run's:
a venv's first build compiles every C++ file, a later one only what changed since (ninja), so
a small figure there is an incremental build. `tests` names what was run when it was not the
whole suite.

| venv | torch | python | venv disk | build disk | venv s | build s | tests s | tests | result | date |
|---|---|---|---|---|---|---|---|---|---|---|
"""


def disk(path: Path) -> str:
    total = sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
    return f"{total / 2**30:.1f} GiB" if total >= 2**30 else f"{total / 2**20:.0f} MiB"


def record(name: str, cells: list) -> None:
    """Put this run's row into docs/torch-versions.md, replacing the venv's previous one."""
    old = FIGURES.read_text().splitlines() if FIGURES.exists() else []
    rows = [line for line in old if line.startswith("| ") and not line.startswith(("| venv |", f"| {name} |"))
            and not line.startswith("|---")]
    rows.append("| " + " | ".join([name, *map(str, cells)]) + " |")
    FIGURES.write_text(_HEADER + "\n".join(sorted(rows)) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch", required=True, help="the torch version, e.g. 2.14.1")
    parser.add_argument("--python", help="X.Y or a path (default: this interpreter)")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest (default: -q)")
    args = parser.parse_args()
    python = interpreter(args.python) if args.python else sys.executable
    name = f"torch{args.torch}" + (f"-py{args.python}" if args.python and os.path.sep not in args.python else "")
    out = ROOT / f"build-{name}"

    t0 = time.monotonic()
    py = venv_for(name, python, requirements(args.torch))
    setup_s = time.monotonic() - t0
    build_s = build(py, out)
    site = site_with_build(out)

    env = dict(os.environ, PYTHONSAFEPATH="1", PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    # The Makefile switches the backend's autoload off for building; the suite needs it on:
    # spawned ranks, torchrun's workers and `python -c` subprocesses find `neuron` only by it.
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    check = subprocess.run([str(py), "-c", "import torch, torch_neuron_sim._C as c; print(torch.__version__, c.__file__)"],
                           cwd=ROOT, env=env, capture_output=True, text=True)
    if check.returncode or str(site) not in check.stdout:
        print(f"test_torch_version: the extension built for torch {args.torch} is not the one imported:\n"
              f"{check.stdout}{check.stderr}", file=sys.stderr)
        return 1
    print(f"test_torch_version: torch {check.stdout.split()[0]}, extension {check.stdout.split()[1]} "
          f"(venv {setup_s:.0f} s, build {build_s:.0f} s)", flush=True)
    t0 = time.monotonic()
    run = subprocess.Popen([str(py), "-m", "pytest", "-p", "no:cacheprovider", *(args.pytest_args or ["-q"])],
                           cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    last = ""
    for line in run.stdout:  # shown as it comes; the summary line is kept for the record
        print(line, end="", flush=True)
        if " in " in line and any(w in line for w in ("passed", "failed", "error")):
            last = line.strip(" =\n")
    rc = run.wait()
    tests_s = time.monotonic() - t0
    print(f"test_torch_version: tests {tests_s:.0f} s, exit {rc}", flush=True)
    chosen = " ".join(a for a in args.pytest_args if a.startswith("tests")) or "the suite"
    python_version = subprocess.run([str(py), "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                                    capture_output=True, text=True).stdout.strip()
    record(py.parent.parent.name, [check.stdout.split()[0], python_version, disk(py.parent.parent), disk(out),
                                   f"{setup_s:.0f}", f"{build_s:.0f}", f"{tests_s:.0f}", chosen,
                                   last.split(" in ")[0] or f"exit {rc}", time.strftime("%Y-%m-%d")])
    return rc


if __name__ == "__main__":
    sys.exit(main())
