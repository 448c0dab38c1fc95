"""The cost model against closed forms (docs/profiling.md): a roofline per op
over one logical NeuronCore's share of the chip's figures."""
import pytest

from torch_neuron_sim import profiler

# Chip figures (AWS Neuron architecture pages): dense FLOP/s and HBM bytes/s per chip.
TRN2 = {"cores": 8, "bf16": 667e12, "fp32": 181e12, "fp8": 1299e12, "hbm": 2.9e12}
TRN3 = {"cores": 8, "bf16": 671e12, "fp32": 183e12, "fp8": 2517e12, "hbm": 4.9e12}
TRN1 = {"cores": 2, "bf16": 190e12, "fp32": 48e12, "fp8": 190e12, "hbm": 0.82e12}


def per_core(chip, key, lnc):
    return chip[key] / chip["cores"] * lnc


def mm(n, k, m, dtype="bfloat16", profile="trn2", lnc=None):
    return profiler.op_cost("aten::mm", [((n, k), dtype), ((k, m), dtype)], [((n, m), dtype)],
                            profile=profile, lnc=lnc)


def add(n, dtype="float32", profile="trn2", lnc=None):
    return profiler.op_cost("aten::add.Tensor", [((n,), dtype), ((n,), dtype)], [((n,), dtype)],
                            profile=profile, lnc=lnc)


def launch():
    return profiler.model_figures("trn2")["launch_overhead_s"]


def test_per_core_figures_are_the_chip_share():
    f = profiler.model_figures("trn2", lnc=2)
    assert f["peak_flops"]["bfloat16"] == pytest.approx(per_core(TRN2, "bf16", 2))
    assert f["peak_flops"]["float32"] == pytest.approx(per_core(TRN2, "fp32", 2))
    assert f["peak_flops"]["float8"] == pytest.approx(per_core(TRN2, "fp8", 2))
    assert f["hbm_bytes_per_s"] == pytest.approx(per_core(TRN2, "hbm", 2))
    t1 = profiler.model_figures("trn1")
    assert t1["lnc"] == 1 and t1["peak_flops"]["bfloat16"] == pytest.approx(TRN1["bf16"] / 2)


def test_large_bf16_matmul_takes_flops_over_peak():
    n = 8192
    c = mm(n, n, n)
    flops = 2 * n ** 3
    assert c["flops"] == flops
    assert c["bound"] == "compute"
    assert c["seconds"] - c["launch_seconds"] == pytest.approx(flops / per_core(TRN2, "bf16", 2), rel=1e-9)


def test_large_elementwise_takes_bytes_over_bandwidth():
    n = 1 << 26
    c = add(n)
    assert c["bytes"] == 3 * 4 * n  # two reads, one write
    assert c["bound"] == "memory"
    assert c["seconds"] - c["launch_seconds"] == pytest.approx(3 * 4 * n / per_core(TRN2, "hbm", 2), rel=1e-9)


def test_64bit_tensors_move_as_32bit():
    assert add(1024, "float64")["bytes"] == add(1024, "float32")["bytes"]


def test_regime_switches_at_the_ridge_point():
    # A square bf16 matmul has intensity 2n^3 / (3 * 2n^2) = n/3 FLOPs per byte.
    ridge = per_core(TRN2, "bf16", 2) / per_core(TRN2, "hbm", 2)
    n_ridge = 3 * ridge
    below, above = mm(int(n_ridge * 0.9), int(n_ridge * 0.9), int(n_ridge * 0.9)), mm(
        int(n_ridge * 1.1), int(n_ridge * 1.1), int(n_ridge * 1.1))
    assert below["bound"] == "memory" and above["bound"] == "compute"
    n = int(n_ridge * 0.9)
    assert below["seconds"] - below["launch_seconds"] == pytest.approx(3 * 2 * n * n / per_core(TRN2, "hbm", 2))


def test_trn3_is_faster_where_its_figures_say_so():
    # Memory-bound: trn3's HBM is 4.9 vs 2.9 TB/s per chip.
    a2, a3 = add(1 << 26, profile="trn2"), add(1 << 26, profile="trn3")
    assert (a2["seconds"] - launch()) / (a3["seconds"] - launch()) == pytest.approx(4.9 / 2.9, rel=1e-6)
    # bf16 compute: 671 vs 667 TFLOPS, barely faster; fp8 nearly twice.
    m2, m3 = mm(8192, 8192, 8192, profile="trn2"), mm(8192, 8192, 8192, profile="trn3")
    assert m3["seconds"] < m2["seconds"]
    assert (m2["seconds"] - launch()) / (m3["seconds"] - launch()) == pytest.approx(671 / 667, rel=1e-6)
    f2 = mm(8192, 8192, 8192, "float8_e4m3fn", profile="trn2")
    f3 = mm(8192, 8192, 8192, "float8_e4m3fn", profile="trn3")
    assert (f2["seconds"] - launch()) / (f3["seconds"] - launch()) == pytest.approx(2517 / 1299, rel=1e-6)


def test_lnc1_halves_per_core_figures():
    f1, f2 = profiler.model_figures("trn2", lnc=1), profiler.model_figures("trn2", lnc=2)
    assert f1["peak_flops"]["bfloat16"] == pytest.approx(f2["peak_flops"]["bfloat16"] / 2)
    assert f1["hbm_bytes_per_s"] == pytest.approx(f2["hbm_bytes_per_s"] / 2)
    big = mm(8192, 8192, 8192, lnc=1)
    assert big["seconds"] - big["launch_seconds"] == pytest.approx(2 * (mm(8192, 8192, 8192, lnc=2)["seconds"]
                                                                        - launch()))


def test_small_ops_cost_the_launch_overhead():
    c = add(16)
    assert c["launch_seconds"] == launch()
    assert c["seconds"] == pytest.approx(launch(), rel=1e-3)


def test_transfers_and_collectives():
    f = profiler.model_figures("trn2")
    t = profiler._C._prof_transfer_cost("trn2", 2, 1e9)
    assert t["seconds"] == pytest.approx(f["transfer_latency_s"] + 1e9 / f["host_device_bytes_per_s"])
    # A ring all-reduce sends 2(n-1)/n of the buffer; all-gather (n-1)/n.
    ar = profiler._C._prof_collective_cost("trn2", 2, "all_reduce", 1e9, 4)
    ag = profiler._C._prof_collective_cost("trn2", 2, "all_gather_into_tensor", 1e9, 4)
    assert ar["seconds"] - ar["launch_seconds"] == pytest.approx(1e9 * 1.5 / f["link_bytes_per_s"])
    assert ag["seconds"] - ag["launch_seconds"] == pytest.approx(1e9 * 0.75 / f["link_bytes_per_s"])


def test_constants_are_overridable_and_checked():
    prev = profiler.set_cost_model("trn3", 1, launch_overhead_s=1e-3)
    try:
        m = profiler.cost_model()
        assert (m["profile"], m["lnc"], m["launch_overhead_s"]) == ("trn3", 1, 1e-3)
    finally:
        profiler.set_cost_model(**prev)
    assert profiler.cost_model()["launch_overhead_s"] == prev["launch_overhead_s"]
    with pytest.raises(ValueError, match="unknown cost model constant"):
        profiler.set_cost_model(warp_speed=9)
    with pytest.raises(ValueError, match="unknown Trainium profile"):
        profiler.model_figures("trn9")
    with pytest.raises(ValueError, match="LNC=3"):
        profiler.model_figures("trn2", lnc=3)
