"""`make test-sanitize` and `make test-tsan`: the extension built with
AddressSanitizer + UndefinedBehaviorSanitizer (build-sanitize/) or with
ThreadSanitizer (build-tsan/), the normal build untouched, then the tests that
exercise the C++ layers run against it. Each rewrites its own section of
docs/sanitizer.md with this run's figures; exits non-zero on a failed build,
a failed test or a sanitizer report.

CPython and torch are not instrumented: the sanitizer's runtime is preloaded.
ASan: leak detection is off (CPython and torch keep allocations alive until
exit by design) and a finding aborts the process (halt_on_error /
abort_on_error), so it cannot pass unnoticed. TSan: each process writes its
reports to a file of its own in build-tsan/reports/ (a test that runs a
subprocess keeps its stderr to itself), which the run counts; suppressions
(scripts/tsan_suppressions.txt) each say why. PYTHONSAFEPATH (python -P,
inherited by the tests' subprocesses) keeps the checkout's own
torch_neuron_sim (normal build) from shadowing the sanitized copy; the first
check proves the copy is the one imported.

Usage: python scripts/test_sanitize.py [--thread] [--no-doc] TEST...   (the Makefile passes its test lists)
       --no-doc: prints the figures and leaves the page alone (a run of one test id, to
       reproduce a finding, must not replace the figures of the whole target)
       python scripts/test_sanitize.py --page   (rewrites the page's text without a run; keeps no figures)
"""
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "sanitizer.md"
TSAN_SUPPRESSIONS = ROOT / "scripts" / "tsan_suppressions.txt"


class Kind:
    def __init__(self, key, title, build_flag, build_dir, runtime, target, tests_var, text):
        self.key, self.title, self.build_flag = key, title, build_flag
        self.dir, self.runtime, self.target, self.tests_var, self.text = build_dir, runtime, target, tests_var, text


ASAN = Kind("asan", "AddressSanitizer and UndefinedBehaviorSanitizer", "1", ROOT / "build-sanitize", "libasan.so",
            "make test-sanitize", "SANITIZE_TESTS", [
                "`make test-sanitize` builds the extension with `-fsanitize=address,undefined` (`-O1`, line",
                "tables, frame pointers, UBSan fatal) in `build-sanitize/`, with the precompiled header and the",
                "file groups of the normal build, preloads libasan into an uninstrumented CPython (leak detection",
                "off) and runs the tests that exercise the C++ layers (the `SANITIZE_TESTS` of the Makefile); any",
                "report aborts the run. No finding is suppressed.",
            ])
TSAN = Kind("tsan", "ThreadSanitizer", "thread", ROOT / "build-tsan", "libtsan.so", "make test-tsan", "TSAN_TESTS", [
    "`make test-tsan` builds the extension with `-fsanitize=thread` (`-O1`, line tables) in `build-tsan/`,",
    "preloads libtsan into an uninstrumented CPython and runs the tests that exercise the C++ layers, the",
    "same as the ASan target's (the `TSAN_TESTS` of the Makefile), among them those that drive the",
    "device from several threads: the eight-thread test with its collectives, streams, the autograd",
    "device thread at exit.",
    "Every process writes its reports to a file of its own; the run counts them, and any unsuppressed",
    "report fails it. Memory accesses inside torch and CPython are not instrumented, so a race",
    "is seen where at least one side is this project's code. Suppressions, each with its reason, are",
    "in `scripts/tsan_suppressions.txt` and listed below. Two settings of the run: a child forked by a",
    "multi-threaded process, such as a DataLoader worker, lives on (`die_after_fork=0`; TSan kills one",
    "that starts threads, and Python's multiprocessing starts its own), and the drain of autograd's",
    "device threads at exit may wait 60 s (`NEURON_SIM_EXIT_DRAIN_MS`), its first run being slow under TSan.",
])
KINDS = (ASAN, TSAN)


def clean_build_seconds(kind: Kind) -> tuple[float, int]:
    """What a build from scratch costs with one job: the sum of each object's
    last compile time in ninja's log (a rerun compiles only what changed, so its
    own wall time says nothing of a clean clone's)."""
    last: dict[str, float] = {}
    for log in (kind.dir / "obj").rglob(".ninja_log"):
        for line in log.read_text().splitlines():
            parts = line.split("\t")
            if len(parts) == 5 and parts[3].endswith(".o"):
                # by the object's last two path parts: a build run with a relative and then an
                # absolute --build-temp logs the same object under two paths
                last["/".join(parts[3].split("/")[-2:])] = (int(parts[1]) - int(parts[0])) / 1000.0
    return sum(last.values()), len(last)


# CI's budgets: `make test` under 20 minutes on a
# 2-core machine; CI has 90 minutes in all on a clean clone, whose normal build
# and `make test` take their share first.
MAKE_TEST_BUDGET_S = 20 * 60
CI_SPARE_S = 90 * 60 - 2 * MAKE_TEST_BUDGET_S


def ci_minutes(kind: Kind) -> int | None:
    """The clean-clone minutes the page's section of a target gives (None before its first run)."""
    m = re.search(r"In CI: a clean clone needs about (\d+) min", current_sections()[kind.key])
    return int(m.group(1)) if m else None


def ci_text(kind: Kind, clean_s: float, test_s: float) -> str:
    """Whether the run fits CI, from this run's figures: the sanitizer flags share
    no object with the normal build, so a clean clone compiles everything again
    (two jobs, the Makefile's MAX_JOBS). `.ci/run` runs ASan after `make test`, then TSan."""
    need = clean_s / 2 + test_s
    head = (f"In CI: a clean clone needs about {need / 60:.0f} min for this target (the build from "
            f"scratch with two jobs, then the tests).")
    before = 0 if kind is ASAN else 60 * (ci_minutes(ASAN) or 0)  # what runs before it beside make test
    beside = "the normal build and `make test`" + ("" if kind is ASAN else
                                                   f" and the ASan target (about {before / 60:.0f} min)")
    if need + before <= CI_SPARE_S:
        return head + (f" That fits beside {beside} in CI's 90 minutes, and `.ci/run` runs it after "
                       + ("`make test`" if kind is ASAN else "`make test-sanitize`")
                       + "; it stays out of `make test`, whose 20 minutes it would double.")
    return head + (f" That does not fit: CI's 90 minutes leave about {(CI_SPARE_S - before) / 60:.0f} beside "
                   f"{beside}. It is a target of its own, for a nightly job and for a run "
                   "before landing a change to the C++ layers (execution path, allocator, kernels, threads).")


def markers(kind: Kind) -> tuple[str, str]:
    return (f"<!-- {kind.key}: start ({kind.target} writes this) -->", f"<!-- {kind.key}: end -->")


NO_RUN = ["No run is recorded here yet: the figures (the result, the build's and the tests' time, and",
          "whether the target fits CI) appear when the target has run."]


def section(kind: Kind, run: list[str]) -> str:
    start, end = markers(kind)
    return "\n".join([f"## {kind.title}", "", *kind.text, "", start, *run, end])


def page(sections: dict[str, str]) -> str:
    """docs/sanitizer.md: what the targets do, then each target's section."""
    return "\n".join([
        "# Sanitizer runs: the C++ layers under AddressSanitizer, UBSan and ThreadSanitizer",
        "",
        "<!-- generated by `make test-sanitize` and `make test-tsan` (scripts/test_sanitize.py); "
        "do not edit by hand -->",
        "",
        "Two targets rebuild the extension with a sanitizer, in a directory of their own (the normal",
        "build is untouched), and run the tests that exercise the C++ layers against it. Each rewrites",
        "its own section below with its last run's figures. The sanitizer flags share no object with",
        "the normal build, so each compiles every C++ file again; neither is part of `make test`.",
        "",
        sections["asan"],
        "",
        sections["tsan"],
        "",
    ])


def current_sections() -> dict[str, str]:
    """Each kind's section as the page has it now (a run rewrites only its own)."""
    text = DOC.read_text() if DOC.exists() else ""
    out = {}
    for kind in KINDS:
        start, end = markers(kind)
        m = re.search(re.escape(start) + r"\n(.*?)\n" + re.escape(end), text, re.S)
        out[kind.key] = section(kind, m.group(1).splitlines() if m else NO_RUN)
    return out


def write_section(kind: Kind, run: list[str]) -> None:
    sections = current_sections()
    sections[kind.key] = section(kind, run)
    DOC.write_text(page(sections))


def stream(cmd, env, tail: list) -> int:
    """Runs cmd, echoing its output and keeping it in tail."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        sys.stdout.write(line)
        tail.append(line.rstrip("\n"))
    return proc.wait()


def suppressions() -> list[tuple[str, str]]:
    """(pattern, reason) of each TSan suppression: the comment lines above it are its reason."""
    out, block, reason = [], [], ""
    for line in TSAN_SUPPRESSIONS.read_text().splitlines():
        if line.startswith("#"):
            block.append(line.lstrip("# ").strip())
        elif line.strip():  # the comment block above a run of patterns is the reason of each
            reason = " ".join(block) if block else reason
            block = []
            out.append((line.strip(), reason))
        else:  # a blank line ends a block (the file's header is not a reason)
            block = []
    return out


def main(kind: Kind, tests: list[str], doc: bool = True) -> int:
    # No ccache: a hit would log a compile of a fraction of a second in ninja's log, whose times
    # are the build-from-scratch figure; ninja alone keeps a rerun incremental.
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", NEURON_SIM_SANITIZE=kind.build_flag,
               CCACHE_DISABLE="1")
    env.setdefault("MAX_JOBS", "1")
    build_out: list[str] = []
    t0 = time.monotonic()
    rc = stream([sys.executable, "setup.py", "-q", "build_ext", "--build-temp", str(kind.dir / "obj"),
                 "--build-lib", str(kind.dir / "lib")], env, build_out)
    build_s = time.monotonic() - t0
    compiled = sum(1 for line in build_out if re.match(r"\[\d+/\d+\] ", line) and " -c " in line)
    if rc:
        print(f"{kind.target}: the sanitized build failed (exit {rc})", file=sys.stderr)
        return rc

    site = kind.dir / "site"
    shutil.rmtree(site, ignore_errors=True)
    shutil.copytree(ROOT / "torch_neuron_sim", site / "torch_neuron_sim",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    for so in (kind.dir / "lib" / "torch_neuron_sim").glob("*.so"):
        shutil.copy2(so, site / "torch_neuron_sim" / so.name)

    cxx = os.environ.get("CXX", "c++")

    def lib(name):
        return subprocess.run([cxx, f"-print-file-name={name}"], capture_output=True, text=True,
                              check=True).stdout.strip()

    # libstdc++ too: CPython does not link it, and the sanitizer, preloaded alone, finds no
    # real __cxa_throw for its interceptor, so the first C++ exception (any
    # TORCH_CHECK) aborts with "CHECK failed: ... real___cxa_throw".
    run_env = dict(os.environ, PYTHONSAFEPATH="1", PYTHONPATH=str(site),
                   LD_PRELOAD=f"{lib(kind.runtime)}:{lib('libstdc++.so')}")
    # The Makefile's build environment turns torch's backend autoload off (building imports torch);
    # the tests run as a user's program does, with it on (one checks that `import torch` loads us).
    run_env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    reports = kind.dir / "reports"
    if kind is ASAN:
        run_env.update(ASAN_OPTIONS="detect_leaks=0:abort_on_error=1",
                       UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    else:
        shutil.rmtree(reports, ignore_errors=True)
        reports.mkdir(parents=True)
        # exitcode=0: a report fails the run through its count here, not by changing the exit
        # status of a test's subprocess (whose test would fail for the wrong reason).
        # One OpenMP thread: libgomp is not instrumented, so TSan cannot see its barriers, and a
        # kernel's parallel_for body (this project's code) would race with itself in every report.
        run_env["OMP_NUM_THREADS"] = "1"
        # handle_segv=0: a segfault a test provokes on purpose (NEURON_SIM_PROTECT's host read of
        # device memory) reaches Python's faulthandler and kills the process as without TSan; TSan's
        # own handler would report it and exit with exitcode, 0 here, as if the program had passed.
        # die_after_fork=0: TSan does not support a child of a multi-threaded fork that starts
        # threads, and by default kills it. A DataLoader's fork'ed worker is one: its parent has
        # torch's autograd device threads once any backward ran, and the worker starts Python's
        # own multiprocessing threads (the Queue's feeder, the resource sharer), none of ours.
        # The child uses no device (the parent pins), so it goes on, still instrumented.
        # The drain of autograd's device threads at exit waits 2 s in a normal build, where it takes
        # a millisecond; under TSan the first one, which waits for the threads' start-up, took
        # 0.5-0.7 s at load 4 (and past 2 s at load 16), so that a test saw it give up.
        run_env["NEURON_SIM_EXIT_DRAIN_MS"] = "60000"
        run_env["TSAN_OPTIONS"] = (f"log_path={reports}/tsan:exitcode=0:second_deadlock_stack=1:"
                                   f"suppressions={TSAN_SUPPRESSIONS}:report_signal_unsafe=0:handle_segv=0:"
                                   "die_after_fork=0")
    where = subprocess.run([sys.executable, "-c", "import torch_neuron_sim._C as c; print(c.__file__)"],
                           env=run_env, capture_output=True, text=True)
    if where.returncode or str(site) not in where.stdout:
        print(f"{kind.target}: the sanitized extension is not the one imported:\n{where.stdout}{where.stderr}",
              file=sys.stderr)
        return 1

    test_out: list[str] = []
    t0 = time.monotonic()
    rc = stream([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], run_env, test_out)
    test_s = time.monotonic() - t0
    if kind is ASAN:
        findings = [line for line in test_out if "ERROR: AddressSanitizer" in line or "runtime error:" in line]
    else:
        findings = []
        for log in sorted(reports.glob("tsan*")):
            text = log.read_text(errors="replace")
            findings += [m.group(0) for m in re.finditer(r"WARNING: ThreadSanitizer: .*", text)]
            if "WARNING: ThreadSanitizer" in text:
                print(f"{kind.target}: reports in {log}", file=sys.stderr)
    summary = next((line for line in reversed(test_out) if re.search(r"\d+ (passed|failed|error)", line)),
                   f"pytest exited {rc} without a summary")
    clean_s, objects = clean_build_seconds(kind)
    verdict = "clean" if rc == 0 and not findings else "FAILED"
    run = [
        "Figures of the last run:",
        "",
        "| | |",
        "|---|---|",
        f"| result | {verdict}: {summary.strip()} |",
        f"| sanitizer reports | {len(findings)} |",
        f"| build, this run | {build_s:.0f} s ({compiled} translation units compiled, MAX_JOBS={env['MAX_JOBS']}) |",
        f"| build from scratch | {clean_s:.0f} s of compilation for {objects} objects (one job; ninja's log) |",
        f"| tests | {test_s:.0f} s ({len(tests)} files) |",
    ]
    if kind is TSAN:
        listed = suppressions()
        run += [f"| suppressions | {len(listed)} |", ""]
        run += ["| suppressed | why |", "|---|---|", *[f"| `{p}` | {why} |" for p, why in listed]] if listed else []
        kinds = sorted({f.split(": ", 1)[1].split(" (")[0] for f in findings})
        if kinds:
            run += ["", "Reports of this run: " + ", ".join(f"{f} ({sum(x.find(f) > 0 for x in findings)})"
                                                         for f in kinds) + "."]
    run += ["", ci_text(kind, clean_s, test_s)]
    if doc:
        write_section(kind, run)
    else:
        print("\n".join(run))
    for line in findings:
        print(f"{kind.target}: {line}", file=sys.stderr)
    return rc or (1 if findings else 0)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args == ["--page"]:
        DOC.write_text(page({k.key: section(k, NO_RUN) for k in KINDS}))
        sys.exit(0)
    kind = TSAN if "--thread" in args else ASAN
    sys.exit(main(kind, [a for a in args if a not in ("--thread", "--no-doc")], doc="--no-doc" not in args))
