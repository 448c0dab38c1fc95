"""Collectives under the device's numerics (docs/numerics.md): integer
all_reduce and reduce_scatter sum in fp32 (exact below 2^24), bf16 sums are
rounded once, stochastically when NEURON_RT_STOCHASTIC_ROUNDING_EN=1."""
from dist_harness import run_ranks

WS = 2


def test_integer_all_reduce_and_reduce_scatter_compute_in_fp32():
    results = run_ranks("integer_sums", WS, module="numerics_workers.py")
    for r in results:
        for dtype in ("torch.int32", "torch.int64"):
            small, big, mine = r[dtype]
            assert small == [3 * WS, -5 * WS, WS << 20]  # below 2^24: exact
            # 2 x (2^24 + 1): each input is 2^24 in fp32 already, the sum 2^25
            assert big == [1 << 25, 14]
            assert mine == [1 << 25]
        assert r["hits"] == {"all_reduce": 2, "reduce_scatter_tensor": 2}


def test_bf16_all_reduce_rounds_stochastically_when_switched_on():
    off = run_ranks("bf16_sums", WS, module="numerics_workers.py")
    assert off[0] == [1.0, 1.0]  # 1 + 0.001 rounds to 1 under round to nearest
    on = run_ranks("bf16_sums", WS, module="numerics_workers.py", env={"NEURON_RT_STOCHASTIC_ROUNDING_EN": "1"})
    values, mean = on[0][:-1], on[0][-1]
    assert values == [1.0, 1.0078125]  # the two bf16 neighbours of 1.001
    assert abs(mean - 1.001) < 5e-4
    assert on[0] == on[1]  # every rank holds the same result
