"""Runs a function on every rank of a fresh process group, in spawned
processes, and never hangs: each job has a hard deadline after which its
processes are killed and the test fails.

    results = run_ranks("workers.py", "collectives", world_size=2)

The worker `workers.<name>(rank, world_size, *args)` runs after
init_process_group(backend) (backend=None: the worker initialises itself);
its return value (picklable) comes back per rank.
"""
from __future__ import annotations

import datetime
import importlib.util
import multiprocessing as mp
import os
import queue
import socket
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(module_path, name, rank, world_size, port, backend, pg_timeout, args, env, results):
    os.environ.update(env)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world_size))
    try:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        spec = importlib.util.spec_from_file_location("dist_workers", module_path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if backend is not None:
            # The rendezvous waits long enough for a slow spawn on a loaded machine
            # (importing torch can take seconds); the group's own timeout is the test's.
            store = dist.TCPStore("127.0.0.1", port, world_size, is_master=rank == 0,
                                  timeout=datetime.timedelta(seconds=max(pg_timeout, 120)))
            dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                                    timeout=datetime.timedelta(seconds=pg_timeout))
            store.set_timeout(datetime.timedelta(seconds=pg_timeout))  # what init_method= would have set
        out = getattr(module, name)(rank, world_size, *args)
        if backend is not None and dist.is_initialized():
            dist.destroy_process_group()
        results.put((rank, True, out))
    except BaseException:  # noqa: BLE001 - reported to the parent
        results.put((rank, False, traceback.format_exc()))


def run_ranks(name: str, world_size: int, *, args: tuple = (), backend: str | None = "neuron",
              pg_timeout: float = 20, deadline: float = 150, env: dict | None = None,
              may_die: tuple = (), module: str = "workers.py") -> list:
    """Results per rank. Ranks in `may_die` may exit without a result (None)."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    child_env = {"OMP_NUM_THREADS": "1", **(env or {})}
    procs = [ctx.Process(target=_entry, daemon=True,
                         args=(os.path.join(HERE, module), name, r, world_size, port, backend, pg_timeout, args,
                               child_env, results))
             for r in range(world_size)]
    for p in procs:
        p.start()
    got: dict[int, tuple] = {}
    end = time.monotonic() + deadline
    try:
        while len(got) < world_size and time.monotonic() < end:
            try:
                rank, ok, out = results.get(timeout=0.5)
                got[rank] = (ok, out)
            except queue.Empty:
                # A rank that died without reporting ends the wait for it.
                dead = [r for r, p in enumerate(procs) if p.exitcode is not None and r not in got]
                if dead and all(p.exitcode is not None for r, p in enumerate(procs) if r not in got):
                    break
    finally:
        for p in procs:
            p.join(timeout=max(0.0, min(5.0, end - time.monotonic())))
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
    missing = [r for r in range(world_size) if r not in got and r not in may_die]
    if missing:
        raise AssertionError(f"{name}: rank(s) {missing} returned nothing within {deadline}s "
                             f"(exit codes {[p.exitcode for p in procs]}); killed")
    errors = [f"--- rank {r} ---\n{out}" for r, (ok, out) in sorted(got.items()) if not ok]
    if errors:
        raise AssertionError(f"{name} failed:\n" + "\n".join(errors))
    return [got[r][1] if r in got else None for r in range(world_size)]
