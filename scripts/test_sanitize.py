"""`make test-sanitize`: the extension built with AddressSanitizer and
UndefinedBehaviorSanitizer in build-sanitize/ (the normal build is
untouched), then the tests that exercise the C++ layers run against it.
Writes docs/sanitizer.md with this run's figures; exits non-zero on a
failed build, a failed test or a sanitizer report.

CPython is not instrumented: libasan is preloaded, and leak detection is off
(CPython and torch keep allocations alive until exit by design). A finding
aborts the process (halt_on_error / abort_on_error), so it cannot pass
unnoticed. PYTHONSAFEPATH (python -P, inherited by the tests' subprocesses)
keeps the checkout's own torch_neuron_sim (normal build) from shadowing the
sanitized copy; the first check proves the copy is the one imported.

Usage: python scripts/test_sanitize.py TEST_FILE...   (the Makefile passes SANITIZE_TESTS)
"""
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAN = ROOT / "build-sanitize"
DOC = ROOT / "docs" / "sanitizer.md"


def clean_build_seconds() -> tuple[float, int]:
    """What a build from scratch costs with one job: the sum of each object's
    last compile time in ninja's log (ccache hits would make this run's own
    wall time meaningless for a clean clone)."""
    last: dict[str, float] = {}
    for log in (SAN / "obj").rglob(".ninja_log"):
        for line in log.read_text().splitlines():
            parts = line.split("\t")
            if len(parts) == 5 and parts[3].endswith(".o"):
                last[parts[3]] = (int(parts[1]) - int(parts[0])) / 1000.0
    return sum(last.values()), len(last)


# CI's budgets: `make test` under 20 minutes on this
# 2-core machine; CI has 90 minutes in all on a clean clone, whose normal build
# and `make test` take their share first.
MAKE_TEST_BUDGET_S = 20 * 60
CI_SPARE_S = 90 * 60 - 2 * MAKE_TEST_BUDGET_S


def ci_text(clean_s: float, test_s: float) -> str:
    """Whether the run fits CI, from this run's figures: the sanitizer flags share
    no object with the normal build, so a clean clone compiles everything again
    (two jobs on this machine)."""
    need = clean_s / 2 + test_s
    head = (f"In CI: a clean clone needs about {need / 60:.0f} min for this target (the build from "
            f"scratch with two jobs, then the tests).")
    if need <= CI_SPARE_S:
        return head + (" That fits beside the normal build and `make test` in CI's 90 minutes, so CI runs "
                       "it as a job of its own; it stays out of `make test`, whose 20 minutes it would "
                       "double.")
    return head + (f" That does not fit: CI's 90 minutes leave about {CI_SPARE_S / 60:.0f} beside the normal "
                   "build and `make test`. It is a target of its own, for a nightly job and for a run "
                   "before landing a change to the C++ layers (execution path, allocator, kernels).")


def stream(cmd, env, tail: list) -> int:
    """Runs cmd, echoing its output and keeping it in tail."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        sys.stdout.write(line)
        tail.append(line.rstrip("\n"))
    return proc.wait()


def main(tests: list[str]) -> int:
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", NEURON_SIM_SANITIZE="1")
    env.setdefault("MAX_JOBS", "1")
    build_out: list[str] = []
    t0 = time.monotonic()
    rc = stream([sys.executable, "setup.py", "-q", "build_ext", "--build-temp", str(SAN / "obj"),
                 "--build-lib", str(SAN / "lib")], env, build_out)
    build_s = time.monotonic() - t0
    compiled = sum(1 for line in build_out if re.match(r"\[\d+/\d+\] ", line) and " -c " in line)
    if rc:
        print(f"test-sanitize: the sanitized build failed (exit {rc})", file=sys.stderr)
        return rc

    site = SAN / "site"
    shutil.rmtree(site, ignore_errors=True)
    shutil.copytree(ROOT / "torch_neuron_sim", site / "torch_neuron_sim",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    for so in (SAN / "lib" / "torch_neuron_sim").glob("*.so"):
        shutil.copy2(so, site / "torch_neuron_sim" / so.name)

    cxx = os.environ.get("CXX", "c++")

    def lib(name):
        return subprocess.run([cxx, f"-print-file-name={name}"], capture_output=True, text=True,
                              check=True).stdout.strip()

    # libstdc++ too: CPython does not link it, and ASan, preloaded alone, finds no
    # real __cxa_throw for its interceptor, so the first C++ exception (any
    # TORCH_CHECK) aborts with "CHECK failed: ... real___cxa_throw".
    run_env = dict(os.environ, PYTHONSAFEPATH="1", PYTHONPATH=str(site),
                   LD_PRELOAD=f"{lib('libasan.so')}:{lib('libstdc++.so')}",
                   ASAN_OPTIONS="detect_leaks=0:abort_on_error=1",
                   UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    where = subprocess.run([sys.executable, "-c", "import torch_neuron_sim._C as c; print(c.__file__)"],
                           env=run_env, capture_output=True, text=True)
    if where.returncode or str(site) not in where.stdout:
        print(f"test-sanitize: the sanitized extension is not the one imported:\n{where.stdout}{where.stderr}",
              file=sys.stderr)
        return 1

    test_out: list[str] = []
    t0 = time.monotonic()
    rc = stream([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], run_env, test_out)
    test_s = time.monotonic() - t0
    findings = [line for line in test_out if "ERROR: AddressSanitizer" in line or "runtime error:" in line]
    summary = next((line for line in reversed(test_out) if re.search(r"\d+ (passed|failed|error)", line)),
                   f"pytest exited {rc} without a summary")
    clean_s, objects = clean_build_seconds()
    verdict = "clean" if rc == 0 and not findings else "FAILED"
    DOC.write_text("\n".join([
        "# Sanitizer run: the C++ layers under AddressSanitizer and UndefinedBehaviorSanitizer",
        "",
        "<!-- generated by `make test-sanitize` (scripts/test_sanitize.py); do not edit by hand -->",
        "",
        "`make test-sanitize` builds the extension with `-fsanitize=address,undefined` (`-O1`, frame",
        "pointers, UBSan fatal) in `build-sanitize/`, preloads libasan into an uninstrumented CPython",
        "(leak detection off) and runs the tests that exercise the C++ layers (the `SANITIZE_TESTS` of",
        "the Makefile); any report aborts the run. Third-party code (torch, CPython) is not",
        "instrumented and no finding is suppressed.",
        "",
        "Figures of the last run:",
        "",
        "| | |",
        "|---|---|",
        f"| result | {verdict}: {summary.strip()} |",
        f"| sanitizer reports | {len(findings)} |",
        f"| build, this run | {build_s:.0f} s ({compiled} translation units compiled, MAX_JOBS={env['MAX_JOBS']}) |",
        f"| build from scratch | {clean_s:.0f} s of compilation for {objects} objects (one job; ninja's log) |",
        f"| tests | {test_s:.0f} s ({len(tests)} files) |",
        "",
        ci_text(clean_s, test_s),
        "",
    ]))
    for line in findings:
        print(f"test-sanitize: {line}", file=sys.stderr)
    return rc or (1 if findings else 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
