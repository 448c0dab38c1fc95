"""A rank killed (SIGKILL) mid-collective, mid-send/recv and mid-pipeline
step: every surviving rank raises within the group's timeout, naming the
dead peer; nothing hangs (dist_harness kills whatever outlives its deadline)."""
import re

import pytest
from dist_harness import run_ranks

TIMEOUT = 20  # the group's timeout, seconds: far above how fast a dead peer is noticed


def seconds(msg: str) -> float:
    return float(re.search(r"\[after ([0-9.]+)s\]$", msg).group(1))


def check(msg: str, dead: int, kill_after: float = 1.0) -> None:
    assert msg.startswith(("RuntimeError", "DistBackendError", "ValueError")), msg
    assert f"rank {dead}" in msg, msg
    assert seconds(msg) < TIMEOUT, msg  # noticed, not waited out


@pytest.mark.parametrize("transport", ["shared memory", "store"])
def test_a_rank_killed_mid_collective_fails_every_survivor_naming_it(transport):
    env = {"NEURON_SIM_AGREEMENT": "store"} if transport == "store" else {}
    results = run_ranks("killed_mid_collective", 3, module="kill_workers.py", pg_timeout=TIMEOUT, may_die=(2,),
                        env=env)
    assert results[2] is None
    for rank in (0, 1):
        check(results[rank], dead=2)


def test_a_rank_killed_mid_recv_fails_the_receiver_naming_it():
    results = run_ranks("killed_mid_recv", 2, module="kill_workers.py", pg_timeout=TIMEOUT, may_die=(1,))
    assert results[1] is None
    check(results[0], dead=1)


def test_a_rank_killed_mid_send_fails_the_sender_naming_it():
    results = run_ranks("killed_mid_send", 2, module="kill_workers.py", pg_timeout=TIMEOUT, may_die=(1,))
    assert results[1] is None
    check(results[0], dead=1)


def test_a_rank_killed_mid_pipeline_step_fails_the_other_stage_naming_it():
    results = run_ranks("killed_mid_pipeline_step", 2, module="kill_workers.py", pg_timeout=TIMEOUT, may_die=(1,))
    assert results[1] is None
    check(results[0], dead=1)
