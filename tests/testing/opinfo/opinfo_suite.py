"""PyTorch's OpInfo database on `neuron` against the CPU, crash-isolated.

What one check does (PyTorch's own test_compare_cpu, extended to gradients):
samples are made on `neuron`, copied to the CPU for the reference, the op
runs on both, outputs go through the sample's output_process_fn_grad and are
compared with torch.testing.assert_close at its default tolerance for the
dtype (tighter than test_compare_cpu's 1e-3), except where the device's
64-bit rule applies: a float64 (complex128) result is computed in float32
(complex64) on the device, so both sides are compared in the dtype the
device computes in, at its tolerance (the device wins where it and the CPU
differ). Backward: the same random
cotangents on both sides, torch.autograd.grad over every input that
requires grad, gradients compared the same way. op_db's declared skips for
test_compare_cpu are honoured, except "non-deterministic" ones: random ops
are compared by value after the same torch.manual_seed (the fallback's
random ops draw from the CPU stream), by their distribution when values
differ (dropout draws from the device's generator).

Crash isolation: checks run in `spawn`ed worker processes fed one task (one
op, all its dtypes and directions) at a time over a pipe. A worker that
dies (segfault, abort) or hangs costs exactly the task it was running,
which is recorded as a crash; a new worker takes the rest.

The results are a table op x dtype x direction of statuses; render_table()
writes docs/op-coverage.md and parse_table() reads it back, so the test can
fail on any regression against the committed table.
"""
from __future__ import annotations

import math
import multiprocessing
import os
import re
import time
import traceback
import zlib
from dataclasses import dataclass, field

# Statuses, best first. An op x dtype x direction gets the worst of its samples'.
PASS = "pass"
UNSUPPORTED = "unsupported"      # neuron refused a feature the device lacks (sparse layouts) where the CPU ran
MISMATCH = "mismatch"            # both ran, values (or dtypes, shapes) differ
ERROR = "error"                  # neuron raised where the CPU ran
CRASH = "crash"                  # the worker died or hung
EXPECTED_ERROR = "expected-error"  # every sample raises on CPU and on neuron alike
SKIP = "skip"                    # op_db declares test_compare_cpu skipped for it
NO_CPU = "cpu-unsupported"       # no sample runs on the CPU: nothing to compare
LENIENT = "device-accepts"       # the CPU raised on a sample and neuron returned a value, the other samples pass
# Ranked statuses are the compared ones: the CPU ran, so they count in a rate's denominator.
RANK = {PASS: 0, UNSUPPORTED: 1, MISMATCH: 2, ERROR: 3, CRASH: 4}

DEVICE = "neuron"
CI_DTYPES = ("float32", "bfloat16")
DEEP_DTYPES = ("float32", "bfloat16", "float16", "int32")
CI_SHARDS = 8


@dataclass
class Config:
    dtypes: tuple = CI_DTYPES
    max_samples: int | None = 3        # None: every reference input
    workers: int = 1                   # the machine is shared: one process beside pytest
    task_timeout: float = 120.0        # seconds for one op (all its dtypes); more means a hang
    ops: list | None = None            # restrict to these op keys (debugging)
    progress: bool = False             # print a line per op done
    shard: tuple | None = None         # (i, n): only the ops with crc32(key) % n == i ...
    always: tuple = ()                 # ... plus these, whatever the shard


@dataclass
class Result:
    status: str
    detail: str = ""
    samples: int = 0


def op_key(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


# ---------------------------------------------------------------------------
# In the worker
# ---------------------------------------------------------------------------

def _skip_reason(op, dtype) -> tuple[str, str] | None:
    """(kind, reason) of a decorator op_db declares for test_compare_cpu, if any."""
    import unittest

    for d in op.decorators:
        if not hasattr(d, "is_active") or not d.is_active("TestCommon", "test_compare_cpu", DEVICE, dtype, {}):
            continue
        for dec in d.decorators:
            if dec is unittest.expectedFailure:
                return "expectedFailure", "declared expected failure"
            if getattr(dec, "__qualname__", "").startswith("skip."):
                reason = next((c.cell_contents for c in (dec.__closure__ or ()) if isinstance(c.cell_contents, str)),
                              "skipped")
                return "skip", reason
    return None


def _tensors(x):
    import torch

    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for e in x:
            yield from _tensors(e)
    elif isinstance(x, dict):
        for e in x.values():
            yield from _tensors(e)


def _to_cpu(x):
    import torch

    if isinstance(x, torch.Tensor):
        if x.device.type != DEVICE:
            return x
        t = x.detach().to("cpu")
        return t.requires_grad_(x.requires_grad) if x.requires_grad else t
    return x


def _structure(x):
    """Outputs as nested lists of CPU tensors and plain values."""
    import torch

    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu") if x.device.type == DEVICE else x.detach()
    if isinstance(x, (list, tuple)):
        return [_structure(e) for e in x]
    if isinstance(x, dict):
        return {k: _structure(v) for k, v in x.items()}
    if isinstance(x, torch.return_types.__dict__.get("_ReturnType", ())):
        return [_structure(e) for e in x]
    return x


# The 64-bit rule (docs/semantics.md): the device computes these dtypes in 32 bits.
_COMPUTED_AS = {"float64": "float32", "complex128": "complex64"}


def _as_device_computes(actual, expected):
    """Both sides with each 64-bit floating tensor the device computes in 32 bits
    cast to that 32-bit dtype, pairwise (a tensor whose dtypes differ is left
    alone, so a dtype mismatch still shows). int64 stays: 32-bit integer
    arithmetic gives the same values unless it overflows, which the device
    would then show as a difference."""
    import torch

    if isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor):
        narrow = _COMPUTED_AS.get(str(actual.dtype).removeprefix("torch."))
        if narrow and actual.dtype == expected.dtype:
            return actual.to(getattr(torch, narrow)), expected.to(getattr(torch, narrow))
        return actual, expected
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)) and len(actual) == len(expected):
        pairs = [_as_device_computes(a, e) for a, e in zip(actual, expected)]
        return [a for a, _ in pairs], [e for _, e in pairs]
    if isinstance(actual, dict) and isinstance(expected, dict) and actual.keys() == expected.keys():
        pairs = {k: _as_device_computes(actual[k], expected[k]) for k in actual}
        return {k: a for k, (a, _) in pairs.items()}, {k: e for k, (_, e) in pairs.items()}
    return actual, expected


def _device_policy() -> str:
    import torch_neuron_sim.execution.dtype_policy as dp

    return dp.get_dtype_policy()


def _compare(actual, expected) -> str | None:
    """None if equal within assert_close's default tolerance for the dtype the
    device computes in, else the message."""
    import torch

    if _device_policy() == "trainium":
        actual, expected = _as_device_computes(actual, expected)
    try:
        torch.testing.assert_close(actual, expected, equal_nan=True, check_device=False)
        return None
    except (AssertionError, TypeError, ValueError, RuntimeError) as e:
        return str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__


def _distribution_matches(actual, expected) -> bool:
    """Random outputs that differ by value: same structure, dtypes and shapes,
    and each float tensor's mean within a generous bound of the CPU one."""
    import torch

    a, b = list(_tensors(actual)), list(_tensors(expected))
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.dtype != y.dtype or x.shape != y.shape:
            return False
        if x.numel() < 2 or not (x.dtype.is_floating_point or x.dtype.is_complex):
            continue  # one draw says nothing about a distribution
        xf, yf = x.double(), y.double()
        if not torch.isfinite(xf).all() or not torch.isfinite(yf).all():
            continue
        spread = float(torch.cat([xf.flatten(), yf.flatten()]).std()) if x.numel() > 1 else 1.0
        if abs(float(xf.mean()) - float(yf.mean())) > 6 * spread / math.sqrt(x.numel()) + 1e-6:
            return False
    return True


# Random ops op_db does not mark non-deterministic for test_compare_cpu (it
# only does for CUDA): they draw from a stream of their own on the device.
RANDOM = {"nn.functional.alpha_dropout"}

# Ops whose outputs are uninitialized memory: only dtypes and shapes compare.
UNINITIALIZED = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided"}


def _metadata_matches(actual, expected) -> bool:
    a, b = list(_tensors(actual)), list(_tensors(expected))
    return len(a) == len(b) and all(x.dtype == y.dtype and x.shape == y.shape for x, y in zip(a, b))


def _err(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0][:200] if msg else ''}"


def _run(fn):
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001 - any op error is data here
        return None, e


def _unsupported_hits() -> int:
    from torch_neuron_sim import tracking

    return sum(tracking.unsupported_features().values())


class _Refusal:
    """Whether the device side refused a feature the device lacks: the emulator
    counts each refusal (tracking.unsupported_features()) as it raises
    NotImplementedError naming it (docs/semantics.md, unsupported features)."""

    def __enter__(self):
        self.before = _unsupported_hits()
        return self

    def __exit__(self, *exc):
        self.hit = _unsupported_hits() > self.before
        return False

    def judge(self, err) -> bool:
        return err is not None and self.hit and isinstance(err, NotImplementedError)


def _cpu_copy(sample):
    """The sample copied to the CPU, or the error that copying it raised: a
    tensor the device holds but cannot compute with (a sparse CSR tensor made
    by a constructor that does not dispatch) already fails here, as on the
    device, and that is the device's answer for the sample."""
    return _run(lambda: sample.transform(_to_cpu))


def _forward_sample(op, sample, random):
    import torch

    with _Refusal() as refusal:
        cpu_sample, copy_err = _cpu_copy(sample)  # before the op: an in-place op changes the sample
        if random:
            torch.manual_seed(1234)
        dev_out, dev_err = _run(lambda: _structure(sample.output_process_fn_grad(
            op(sample.input, *sample.args, **sample.kwargs))))
    if copy_err is not None:
        return _judge(None, dev_err or copy_err, None, None, random, refused=refusal.judge(dev_err or copy_err))
    if random:
        torch.manual_seed(1234)
    cpu_out, cpu_err = _run(lambda: _structure(cpu_sample.output_process_fn_grad(
        op(cpu_sample.input, *cpu_sample.args, **cpu_sample.kwargs))))
    return _judge(dev_out, dev_err, cpu_out, cpu_err, random, op.name in UNINITIALIZED,
                  refused=refusal.judge(dev_err))


def _judge(dev_out, dev_err, cpu_out, cpu_err, random, uninitialized=False, refused=False):
    if cpu_err is not None:
        if dev_err is not None:
            return EXPECTED_ERROR, f"cpu {_err(cpu_err)} | neuron {_err(dev_err)}"
        return LENIENT, f"cpu {_err(cpu_err)} (neuron returns a value)"
    if dev_err is not None:
        return (UNSUPPORTED if refused else ERROR), _err(dev_err)
    if uninitialized:
        return (PASS, "uninitialized: dtypes and shapes match") if _metadata_matches(dev_out, cpu_out) else (
            MISMATCH, "uninitialized: dtypes or shapes differ")
    diff = _compare(dev_out, cpu_out)
    if diff is None:
        return PASS, ""
    if random and _distribution_matches(dev_out, cpu_out):
        return PASS, "random: values differ, distribution matches"
    return MISMATCH, diff


def _grad_inputs(sample):
    import torch

    return [t for t in _tensors([sample.input, sample.args, sample.kwargs])
            if isinstance(t, torch.Tensor) and t.requires_grad]


def _grads(op, sample, cotangent_seed):
    import torch

    out = sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))
    outs = [t for t in _tensors(out) if t.requires_grad and (t.dtype.is_floating_point or t.dtype.is_complex)]
    inputs = _grad_inputs(sample)
    if not outs or not inputs:
        return None
    g = torch.Generator().manual_seed(cotangent_seed)
    cot = [torch.randn(t.shape, generator=g, dtype=torch.float32).to(t.dtype).to(t.device) for t in outs]
    grads = torch.autograd.grad(outs, inputs, cot, allow_unused=True)
    return [None if x is None else x.detach().to("cpu") for x in grads]


def _backward_sample(op, sample, random):
    import torch

    with _Refusal() as refusal:
        cpu_sample, copy_err = _cpu_copy(sample)
        if random:
            torch.manual_seed(1234)
        dev, dev_err = _run(lambda: _grads(op, sample, 7))
    if copy_err is not None:
        return _judge(None, dev_err or copy_err, None, None, random, refused=refusal.judge(dev_err or copy_err))
    if random:
        torch.manual_seed(1234)
    cpu, cpu_err = _run(lambda: _grads(op, cpu_sample, 7))
    if cpu_err is None and dev_err is None and cpu is None and dev is None:
        return None  # nothing differentiable in this sample
    return _judge(dev, dev_err, cpu, cpu_err, random, refused=refusal.judge(dev_err))


def _aggregate(results: list[tuple[str, str]], skipped: str | None = None) -> Result:
    if not results:
        return Result(SKIP, skipped or "no samples") if skipped else Result(NO_CPU, "no samples")
    compared = [(s, d) for s, d in results if s in RANK]
    lenient = [(s, d) for s, d in results if s == LENIENT]
    worst = max(compared, key=lambda sd: RANK[sd[0]]) if compared else None
    # A failure on a sample the CPU runs outranks leniency; leniency outranks a pass:
    # a cell that passes where the CPU runs but accepts a sample the CPU rejects is lenient.
    if lenient and (worst is None or worst[0] == PASS):
        return Result(LENIENT, lenient[0][1], len(results))
    if not compared:
        if all(s == EXPECTED_ERROR for s, _ in results):
            return Result(EXPECTED_ERROR, results[0][1], len(results))
        return Result(NO_CPU, results[0][1], len(results))
    return Result(worst[0], worst[1], len(compared))


def check_op(op, dtype_name: str, direction: str, max_samples) -> Result:
    """One op x dtype x direction ('fwd' or 'bwd')."""
    import itertools

    import torch

    dtype = getattr(torch, dtype_name)
    supported = op.supported_dtypes("cpu") if direction == "fwd" else op.supported_backward_dtypes("cpu")
    if dtype not in supported:
        return Result(NO_CPU, "dtype not supported on CPU by op_db")
    skip = _skip_reason(op, dtype)
    random = op.name in RANDOM
    if skip:
        kind, reason = skip
        if "non-deterministic" in reason or "nondeterministic" in reason:
            random = True
        else:
            return Result(SKIP, f"op_db: {reason}")
    if direction == "bwd" and not (dtype.is_floating_point or dtype.is_complex):
        return Result(NO_CPU, "integer dtype has no gradient")
    torch.manual_seed(0)
    samples = (op.reference_inputs(DEVICE, dtype, requires_grad=direction == "bwd") if max_samples is None
               else itertools.islice(op.sample_inputs(DEVICE, dtype, requires_grad=direction == "bwd"), max_samples))
    results = []
    run = _forward_sample if direction == "fwd" else _backward_sample
    for sample in samples:
        r = run(op, sample, random)
        if r is not None:
            results.append(r)
    return _aggregate(results)


def _worker_main(conn, dtypes, max_samples):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import warnings

    import torch

    torch.set_num_threads(1)
    import torch_neuron_sim  # noqa: F401
    from torch.testing._internal.common_methods_invocations import op_db

    import logging

    logging.getLogger("torch_neuron_sim").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    ops = {op_key(op): op for op in op_db}
    conn.send(("ready", sorted(ops)))
    while True:
        key = conn.recv()
        if key is None:
            return
        out = {}
        for dtype in dtypes:
            for direction in ("fwd", "bwd"):
                try:
                    out[(dtype, direction)] = check_op(ops[key], dtype, direction, max_samples)
                except Exception as e:  # noqa: BLE001 - a harness failure is a result, not a lost run
                    out[(dtype, direction)] = Result(ERROR, "harness: " + _err(e) + " " +
                                                     traceback.format_exc(limit=2).splitlines()[-1][:100])
        conn.send(("done", key, out))


# ---------------------------------------------------------------------------
# In the parent
# ---------------------------------------------------------------------------

def in_shard(key: str, cfg: Config) -> bool:
    if cfg.shard is None or key in cfg.always:
        return True
    i, n = cfg.shard
    return zlib.crc32(key.encode()) % n == i


class _Worker:
    def __init__(self, ctx, cfg):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, cfg.dtypes, cfg.max_samples), daemon=True)
        self.proc.start()
        child.close()
        self.task = None
        self.started = 0.0

    def kill(self):
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)


@dataclass
class Run:
    results: dict = field(default_factory=dict)   # key -> {(dtype, dir): Result}
    op_seconds: dict = field(default_factory=dict)  # key -> seconds its task took
    seconds: float = 0.0
    restarts: int = 0
    which: str = ""          # which entries: every one, or the shard (printed, for a rerun)
    dtypes: tuple = ()


def run_suite(cfg: Config) -> Run:
    ctx = multiprocessing.get_context("spawn")
    t0 = time.monotonic()
    run = Run()
    workers = [_Worker(ctx, cfg) for _ in range(cfg.workers)]
    keys = None
    ready = set()
    pending: list[str] = []
    failed_starts = 0
    from multiprocessing.connection import wait

    def crash(w, why):
        key = w.task
        run.results[key] = {(d, dr): Result(CRASH, why) for d in cfg.dtypes for dr in ("fwd", "bwd")}
        run.op_seconds[key] = time.monotonic() - w.started
        if cfg.progress:
            print(f"opinfo {key}: {why}", flush=True)
        w.task = None

    while True:
        if keys is not None and not pending and all(w.task is None for w in workers):
            break
        timeout = 5.0
        for w in wait([w.conn for w in workers] + [w.proc.sentinel for w in workers], timeout):
            pass
        for i, w in enumerate(list(workers)):
            alive = w.proc.is_alive()  # before draining: a dead worker's last messages still count
            while True:
                try:
                    if not w.conn.poll():
                        break
                    msg = w.conn.recv()
                except (EOFError, OSError):
                    break
                if msg[0] == "ready":
                    if keys is None:
                        keys = [k for k in msg[1] if (cfg.ops is None or k in cfg.ops) and in_shard(k, cfg)]
                        pending = list(reversed(keys))
                    ready.add(id(w))
                elif msg[0] == "done":
                    run.results[msg[1]] = msg[2]
                    run.op_seconds[msg[1]] = time.monotonic() - w.started
                    if cfg.progress:
                        print(f"opinfo {len(run.results)}/{len(keys)} {msg[1]} {run.op_seconds[msg[1]]:.1f} s",
                              flush=True)
                    w.task = None
            hung = w.task is not None and time.monotonic() - w.started > cfg.task_timeout
            if not alive or hung:
                if w.task is None and id(w) not in ready:
                    failed_starts += 1  # died while importing: restarting would loop forever
                    if failed_starts > 3:
                        raise RuntimeError(f"OpInfo workers die on start (exit code {w.proc.exitcode})")
                if w.task is not None:
                    crash(w, f"worker hung (killed after {cfg.task_timeout:.0f} s)" if hung
                          else f"worker died (exit code {w.proc.exitcode})")
                w.kill()
                run.restarts += 1
                workers[i] = w = _Worker(ctx, cfg)
                continue
            if id(w) in ready and w.task is None and pending:
                w.task = pending.pop()
                w.started = time.monotonic()
                w.conn.send(w.task)
    for w in workers:
        try:
            w.conn.send(None)
        except (OSError, BrokenPipeError):
            pass
        w.proc.join(10)
        w.kill()
    run.seconds = time.monotonic() - t0
    return run


# ---------------------------------------------------------------------------
# Figures and the table
# ---------------------------------------------------------------------------

# The project's targets, as fractions of the ops the CPU runs.
TARGETS = {("float32", "fwd"): 0.995, ("bfloat16", "fwd"): 0.99, ("float32", "bwd"): 0.98,
           ("bfloat16", "bwd"): 0.98}

# Cells the page explains one by one (tests/testing/opinfo/explanations.py).
DIFFERENCES = (UNSUPPORTED, MISMATCH, ERROR, CRASH)


@dataclass
class Rate:
    """One (dtype, direction) of a run or of a table: passed of compared (the
    ops the CPU runs), and the cells counted apart."""
    passed: int
    compared: int
    crashes: int
    unsupported: int
    lenient: int  # the device accepts what the CPU rejects

    @property
    def rate(self) -> float:
        return self.passed / self.compared if self.compared else 0.0


def rates(results: dict, dtypes) -> dict:
    """Per (dtype, direction): a Rate. `results` maps op keys to {(dtype,
    direction): Result}, or to {(dtype, direction): status} (a parsed table)."""
    out = {}
    for d in dtypes:
        for dr in ("fwd", "bwd"):
            st = [getattr(r[(d, dr)], "status", r[(d, dr)]) for r in results.values() if (d, dr) in r]
            compared = [s for s in st if s in RANK]
            out[(d, dr)] = Rate(sum(s == PASS for s in compared), len(compared), sum(s == CRASH for s in st),
                                sum(s == UNSUPPORTED for s in st), sum(s == LENIENT for s in st))
    return out


def explanation(explanations: dict, key: str, dtype: str, direction: str) -> str | None:
    """Why a cell differs: explanations are keyed by (op, dtype, direction)."""
    return explanations.get((key, dtype, direction))


_SHORT = {PASS: "pass", UNSUPPORTED: "unsupported", MISMATCH: "**mismatch**", ERROR: "**error**", CRASH: "**CRASH**",
          EXPECTED_ERROR: "expected-error", SKIP: "skip", NO_CPU: "—", LENIENT: "**accepts**"}
_LONG = {v: k for k, v in _SHORT.items()}


def render_table(run: Run, dtypes, explanations: dict, mode: str) -> str:
    cols = [(d, dr) for d in dtypes for dr in ("fwd", "bwd")]
    r = rates(run.results, dtypes)
    lines = [
        "# OpInfo coverage: every op of PyTorch's `op_db` on `neuron` against the CPU",
        "",
        "<!-- generated by `make op-coverage` (tests/testing/opinfo/opinfo_suite.py); do not edit by hand -->",
        "",
        "Each op of PyTorch's OpInfo database runs on `neuron` and on the CPU with the same samples",
        "(made on `neuron`, copied to the CPU, as PyTorch's own `test_compare_cpu`); outputs and",
        "gradients (`torch.autograd.grad`) are compared with `torch.testing.assert_close` at its",
        "default tolerance for the dtype the device computes in: under the 64-bit rule",
        "([semantics.md](semantics.md)) the device computes a float64 result in float32 (complex128",
        "in complex64), so any float64 output, in every op, is compared in float32 at float32's",
        "tolerance — where device and CPU differ, the device's answer is the reference (int64 results",
        "compare exactly: 32-bit arithmetic gives the same values unless it overflows). Random ops",
        "compare by value after the same seed, by distribution where values differ; ops returning",
        "uninitialized memory (`empty*`) by dtype and shape. Each OpInfo entry runs in a",
        "crash-isolated worker process (a crash costs one entry).",
        "",
        f"CI (`make test`, `tests/testing/opinfo/test_opinfo.py`) runs one of {CI_SHARDS} fixed shards of the entries",
        f"(crc32 of the name mod {CI_SHARDS}), chosen by the number of commits in the checkout mod {CI_SHARDS}, so",
        "consecutive commits rotate through all shards and a rerun of the same commit runs the same",
        "one; the test prints the shard, and `NEURON_SIM_OPINFO_SHARD=i/n` picks one. It adds the",
        "entries that once crashed, in float32 and bfloat16, 3 samples an entry, and fails on a",
        "crash, on any cell worse than this table, on a pass rate below this table's for the same",
        "entries, on a cell where the device newly accepts what the CPU rejects, and on an",
        "unexplained difference. `make test-deep` runs every entry in float32, bfloat16, float16 and",
        "int32; `make op-coverage` does the same and rewrites this page.",
        "",
        "Statuses: pass; unsupported (neuron refuses, with `NotImplementedError` naming it, a feature",
        "Trainium does not have — sparse layouts — where the CPU runs: the device fails too, so this is",
        "the expected answer, but it is not a pass and counts against the rate); **mismatch** (values",
        "differ); **error** (neuron raises where the CPU runs); **CRASH**; **accepts** (the device",
        "accepts what the CPU rejects: on some sample the CPU raises and `neuron` returns a value, and",
        "every sample the CPU runs passes; the value has no reference, so it is not a pass, and the",
        "rate leaves it out); expected-error (CPU and neuron both raise on every sample); skip (op_db",
        "declares `test_compare_cpu` skipped); — (the CPU does not run this dtype/direction: nothing to",
        "compare). The rate is pass over the ops the CPU runs (pass, unsupported, mismatch, error,",
        "crash).",
        "",
        f"Run: {mode}, {len(run.results)} OpInfo entries, {run.seconds:.0f} s, {run.restarts} worker restart(s).",
        "",
        "| dtype | direction | pass | of ops CPU runs | rate | target | unsupported | crashes "
        "| device accepts what the CPU rejects |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (d, dr), x in r.items():
        t = TARGETS.get((d, dr))
        target = "" if t is None else f"{100.0 * t:.1f} % ({'met' if x.passed >= t * x.compared else '**missed**'})"
        lines.append(f"| {d} | {dr} | {x.passed} | {x.compared} | {100.0 * x.rate:.2f} % | {target} | "
                     f"{x.unsupported} | {x.crashes} | {x.lenient} |")
    lines += ["", "## Differences, explained", ""]
    diffs = [(key, c, run.results[key][c]) for key in sorted(run.results) for c in cols
             if c in run.results[key] and run.results[key][c].status in DIFFERENCES]
    if not diffs:
        lines.append("None.")
    for key, (d, dr), res in diffs:
        why = explanation(explanations, key, d, dr) or "UNEXPLAINED"
        lines.append(f"- `{key}` {d} {dr}: {res.status} — {why} (`{res.detail[:160]}`)")
    lines += ["", "## Where the device accepts what the CPU rejects", "",
              "The CPU raised on a sample and `neuron` returned a value. On the device this may be right",
              "(its kernels accept more) or a missing check; either way no reference checks the value.", ""]
    lenient = [(key, c, run.results[key][c]) for key in sorted(run.results) for c in cols
               if c in run.results[key] and run.results[key][c].status == LENIENT]
    if not lenient:
        lines.append("None.")
    for key, (d, dr), res in lenient:
        lines.append(f"- `{key}` {d} {dr}: `{res.detail[:200]}`")
    lines += ["", "## Table", "",
              "| op | " + " | ".join(f"{d} {dr}" for d, dr in cols) + " |",
              "|---|" + "---|" * len(cols)]
    for key in sorted(run.results):
        row = run.results[key]
        lines.append(f"| `{key}` | " + " | ".join(_SHORT[row[c].status] if c in row else "" for c in cols) + " |")
    return "\n".join(lines) + "\n"


def parse_table(text: str) -> dict:
    """{op key: {(dtype, direction): status}} from a rendered docs/op-coverage.md."""
    out = {}
    lines = text.splitlines()
    try:
        start = lines.index("## Table")
    except ValueError:
        return out
    header = None
    for line in lines[start + 1:]:
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if header is None:
            header = [tuple(c.split(" ")) for c in cells[1:]]
            continue
        if set(cells[0]) <= {"-"}:
            continue
        key = cells[0].strip("`")
        out[key] = {h: _LONG.get(c, c) for h, c in zip(header, cells[1:]) if c}
    return out


def regressions(run: Run, committed: dict) -> list[str]:
    """Cells worse than in the committed table (crashes always count), and
    cells where the device newly accepts what the CPU rejects."""
    bad = []
    for key, row in run.results.items():
        for col, res in row.items():
            was = committed.get(key, {}).get(col)
            if res.status == CRASH:
                bad.append(f"{key} {col[0]} {col[1]}: crash ({res.detail})")
            elif res.status == LENIENT and was != LENIENT:
                bad.append(f"{key} {col[0]} {col[1]}: {was} -> the device accepts what the CPU rejects "
                           f"({res.detail})")
            elif was is not None and was in RANK and res.status in RANK and RANK[res.status] > RANK[was]:
                bad.append(f"{key} {col[0]} {col[1]}: {was} -> {res.status} ({res.detail})")
            elif was == PASS and res.status not in RANK and res.status != SKIP:
                bad.append(f"{key} {col[0]} {col[1]}: {was} -> {res.status} ({res.detail})")
    return bad


def rates_below(run: Run, committed: dict, dtypes) -> list[str]:
    """(dtype, direction)s whose pass rate over the run's entries is below the
    committed table's over the same entries (a ratchet: the rate may only rise)."""
    keys = set(run.results)
    now = rates(run.results, dtypes)
    was = rates({k: v for k, v in committed.items() if k in keys}, dtypes)
    return [f"{d} {dr}: {now[(d, dr)].passed}/{now[(d, dr)].compared} = {100 * now[(d, dr)].rate:.2f} % "
            f"< {was[(d, dr)].passed}/{was[(d, dr)].compared} = {100 * was[(d, dr)].rate:.2f} % in docs/op-coverage.md"
            for d, dr in now if now[(d, dr)].compared and now[(d, dr)].rate < was[(d, dr)].rate - 1e-12]
