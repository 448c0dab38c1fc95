"""python -m torch_neuron_sim.collect_env: PyTorch's environment report
(torch.utils.collect_env) followed by the emulator's own fields: version,
machine profile, devices, HBM, native-op table, and the settings in force."""
from __future__ import annotations

import os


def emulator_info() -> dict[str, object]:
    import torch_neuron_sim as sim
    from torch_neuron_sim import compile_cache, dtype_policy, metrics, native_ops, tracking
    from torch_neuron_sim.devices.device import machine

    m = machine()
    return {
        "torch_neuron_sim version": sim.__version__,
        "machine profile": m["profile"],
        "logical NeuronCore config (LNC)": m["lnc"],
        "chips": m["chips"],
        "visible devices": sim.device_count(),
        "logical cores on the machine": m["logical_cores_total"],
        "HBM per device": f"{m['hbm_per_device'] / 2**30:g} GiB",
        "native-op table": f"{native_ops.version()} ({len(native_ops.current())} overloads)",
        "dtype policy": dtype_policy.get_dtype_policy(),
        "fallback mode": tracking.fallback_mode(),
        "simulated compile ms": compile_cache.compile_latency_ms(),
        "metrics enabled": metrics.is_enabled(),
        "environment": {k: v for k, v in sorted(os.environ.items())
                        if k.startswith(("NEURON_", "TORCH_NEURONX_"))},
    }


def main() -> None:
    from torch.utils import collect_env

    print(collect_env.get_pretty_env_info())
    print("\ntorch_neuron_sim:")
    for k, v in emulator_info().items():
        if isinstance(v, dict):
            print(f"{k}:" + ("" if v else " (none set)"))
            for ek, ev in v.items():
                print(f"  {ek}={ev}")
        else:
            print(f"{k}: {v}")


if __name__ == "__main__":
    main()
