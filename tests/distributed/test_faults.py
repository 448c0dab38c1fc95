"""Faults get a clear error on every rank, never a hang or lost data."""
import re

from dist_harness import run_ranks


def test_a_rank_that_never_arrives_fails_the_others_after_the_timeout():
    results = run_ranks("missing_rank", 2, pg_timeout=2, deadline=60)
    msg = results[0]
    assert "not every rank of the group reached this collective within the group's timeout" in msg, msg
    assert "all_reduce" in msg
    seconds = float(re.search(r"after ([0-9.]+)s", msg).group(1))
    assert 1.5 <= seconds < 10, msg
