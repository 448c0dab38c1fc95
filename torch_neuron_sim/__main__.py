"""python -m torch_neuron_sim report [options] script.py [args...]

Runs an unmodified script on the emulator and prints the migration report at
exit, even when the script raises. Device-agnostic code (torch.accelerator)
picks `neuron` by itself; --map-cuda also sends "cuda" devices to neuron.
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys
import traceback

FALLBACK_EXIT = 3  # --fail-on-fallback: the script ran, but ops left the device


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m torch_neuron_sim",
                                description="torch_neuron_sim: AWS Trainium's `neuron` device on CPUs.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("report", help="run a script and print its Trainium migration report",
                       description="Run SCRIPT (with its ARGS) on the emulator and report what it would meet "
                                   "on Trainium: CPU fallbacks with source lines, native ops, 64-bit "
                                   "downcasts, unsupported features, peak HBM, eager compilations.")
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.add_argument("--output", "-o", metavar="PATH", help="write the report to PATH instead of stdout")
    r.add_argument("--html", metavar="PATH",
                   help="also write the report as one self-contained HTML page (charts, sortable tables)")
    r.add_argument("--fail-on-fallback", action="store_true",
                   help=f"exit with status {FALLBACK_EXIT} if any op fell back to CPU (for CI gates)")
    r.add_argument("--map-cuda", action="store_true", help='send "cuda" devices to neuron (torch.cuda.* too)')
    r.add_argument("--many-shapes", type=int, default=16, metavar="N",
                   help="flag ops that saw at least N distinct signatures (default 16)")
    r.add_argument("--timeline", metavar="TRACE.json",
                   help="also profile the run and write a Chrome/Perfetto trace with simulated neuron device "
                        "rows (durations from the cost model: estimates, docs/profiling.md)")
    r.add_argument("script", help="the Python script to run")
    r.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    return p


def _run_script(path: str, args: list[str]) -> tuple[int, str | None, str | None]:
    """Runs the script as __main__; returns (exit status, error text, traceback)."""
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        return code, None if code == 0 else f"SystemExit: {e.code}", None
    except BaseException as e:  # the report is printed even when the script fails
        # The traceback from the script's own frames on (not runpy's or ours).
        te = traceback.TracebackException.from_exception(e)
        te.stack = traceback.StackSummary.from_list(
            [f for f in te.stack if f.filename not in (__file__, runpy.__file__, "<frozen runpy>")])
        tb = "".join(te.format())
        sys.stderr.write(tb)
        return 1, f"{type(e).__name__}: {e}", tb
    return 0, None, None


def main(argv: list[str] | None = None) -> int:
    ns = _parser().parse_args(argv)
    import torch_neuron_sim
    from torch_neuron_sim.migration_report import Report

    mapping = None
    if ns.map_cuda:
        from torch_neuron_sim.devices.cuda_map import map_cuda_to_neuron
        mapping = map_cuda_to_neuron()
        mapping.__enter__()
    r = Report(many_shapes=ns.many_shapes, trace=ns.timeline).start()
    try:
        status, error, tb = _run_script(ns.script, ns.args)
    finally:
        r.stop()
        if mapping is not None:
            mapping.__exit__(None, None, None)
    r.data["error"] = error
    r.data["traceback"] = tb
    r.data["script"] = ns.script
    r.data["exit_status"] = status
    if ns.html:
        r.write_html(ns.html)
    text = r.to_json() + "\n" if ns.json else r.text()
    sys.stdout.flush()
    if ns.output:
        with open(ns.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    sys.stdout.flush()
    if status == 0 and ns.fail_on_fallback and r.fallback_ops:
        print(f"--fail-on-fallback: {len(r.fallback_ops)} op(s) fell back to CPU", file=sys.stderr)
        return FALLBACK_EXIT
    return status


if __name__ == "__main__":
    sys.exit(main())
