"""Eight Python threads drive the devices at once, in each of two ranks:
three on a device of their own, four sharing neuron:0 (each on a stream of
its own, allocating and freeing between steps, one CPU fallback per step),
one running collectives in the 2-rank group, all under a migration report
and the profiler. Results equal the serial run's, op counts are exact,
every allocation is given back."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "distributed"))

from dist_harness import run_ranks  # noqa: E402

import thread_workers  # noqa: E402


def test_eight_threads_equal_the_serial_run():
    results = run_ranks("eight_threads", 2, module=os.path.join(HERE, "thread_workers.py"), pg_timeout=60,
                        deadline=400)
    for rank, r in enumerate(results):
        assert r["errors"] == [] and r["hung"] == [], (rank, r["errors"], r["hung"])
        assert r["same"] == list(range(thread_workers.THREADS)), (rank, r["same"])
        # every op counted once, whichever thread ran it: the serial run's counts exactly
        assert r["concurrent_counts"] == r["serial_counts"], rank
        assert r["serial_counts"]["aten::kthvalue.values"]["fallback"] == 7 * thread_workers.STEPS
        # memory accounting back where it started on every device
        assert r["after"] == r["after_serial"] == r["before"], (rank, r)
        # the report saw every fallback, and where each came from
        assert r["report_fallbacks"]["aten::kthvalue.values"] == (7 * thread_workers.STEPS,) * 2, r["report_fallbacks"]
        # the profiler (all threads) saw every thread's kthvalue: twice each, as the functional
        # op and the out= overload it calls, both named aten::kthvalue
        assert r["profiled_kthvalue"] == 2 * 7 * thread_workers.STEPS, r["profiled_kthvalue"]
        # and every matmul of every thread, each with its device time
        mms, device_time = r["profiled_mm"]
        assert mms == r["concurrent_counts"]["aten::mm"]["executed"] and device_time > 0, r["profiled_mm"]
