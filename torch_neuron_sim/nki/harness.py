"""The test entry points of `neuronxcc.nki`, given their simulator meaning:
simulate_kernel(kernel[grid], *arrays) and baremetal(kernel)(*arrays) run the
kernel in the simulator on NumPy arrays (the hardware would run baremetal on a
NeuronCore); benchmark(kernel)(*arrays) runs it once and reports the cost
model's latency of the launch, labelled as an estimate (no device, no
neuron-bench: every percentile is that one modelled figure, and no .neff or
.ntff file is written)."""
from __future__ import annotations

from typing import Any, Callable, Optional

from .kernel import _grid, kernel_function
from .simulate import simulate


def simulate_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """Legacy neuronxcc.nki.simulate_kernel(kernel[grid], *numpy_arrays)."""
    return simulate(kernel)(*args, **kwargs)


def _decorator(cls: type, kernel: Optional[Callable], options: dict) -> Any:
    """`entry(kernel, **options)` and `@entry(**options)` alike."""
    if kernel is None:
        return lambda k: cls(k, (), options)
    return cls(kernel, (), options)


class _Entry:
    def __init__(self, kernel: Any, grid: tuple, options: dict) -> None:
        self.kernel, self.options = kernel, options
        self.grid = grid or kernel_function(kernel)[1]

    def __getitem__(self, grid: Any) -> "_Entry":
        return type(self)(self.kernel, _grid(grid), self.options)

    def _run(self, args: tuple, kwargs: dict) -> tuple:
        sim = simulate(self.kernel, self.grid or None)
        out = sim(*args, **kwargs)
        return out, sim.last_cost


class _Baremetal(_Entry):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(args, kwargs)[0]


def baremetal(kernel: Optional[Callable] = None, **options: Any) -> Any:
    """nki.baremetal(kernel)(*arrays): on hardware, a run on one NeuronCore; here the simulator
    (options such as save_neff_name or artifacts_dir name compiler artefacts: none are made)."""
    return _decorator(_Baremetal, kernel, options)


class LatencyEstimate:
    """benchmark_result.nc_latency: the modelled launch time in microseconds, the same at
    every percentile (the model is deterministic; hardware runs vary)."""

    estimate = True

    def __init__(self, microseconds: float) -> None:
        self.microseconds = microseconds

    def get_latency_percentile(self, percentile: float) -> float:
        if not 0 <= percentile <= 100:
            raise ValueError(f"percentile {percentile} outside 0..100")
        return self.microseconds

    def __repr__(self) -> str:
        return f"LatencyEstimate({self.microseconds:.3f} us, modelled)"


class BenchmarkResult:
    def __init__(self, cost: dict) -> None:
        self.nc_latency = LatencyEstimate(cost["seconds"] * 1e6)
        self.engines_us = {e: s * 1e6 for e, s in cost["engines"].items()}  # modelled time per engine
        self.bound = cost.get("bound")


class _Benchmark(_Entry):
    benchmark_result: Optional[BenchmarkResult] = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out, cost = self._run(args, kwargs)
        self.benchmark_result = BenchmarkResult(cost)
        name = kernel_function(self.kernel)[0].__name__
        skipped = [f"{k}={v!r}" for k, v in self.options.items() if k in ("save_neff_name", "save_trace_name")]
        print(f"nki.benchmark [simulator estimate, not a measurement] {name}: modelled latency "
              f"{self.benchmark_result.nc_latency.microseconds:.2f} us (bound by {cost.get('bound')})"
              + (f"; no NEFF/NTFF written ({', '.join(skipped)}): the simulator compiles nothing" if skipped else ""))
        return out


def benchmark(kernel: Optional[Callable] = None, **options: Any) -> Any:
    """nki.benchmark(kernel, warmup=, iters=, save_neff_name=, save_trace_name=)(*arrays): runs
    the kernel once in the simulator; `.benchmark_result.nc_latency.get_latency_percentile(p)`
    is the cost model's latency in microseconds, an estimate (warmup and iters change nothing)."""
    return _decorator(_Benchmark, kernel, options)
