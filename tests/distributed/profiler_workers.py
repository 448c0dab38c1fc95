"""Workers for test_profiler_collectives.py (run in spawned ranks by dist_harness)."""
import json
import os
import tempfile


def profiled_collectives(rank, world_size):
    """Collectives of the neuron process group under torch.profiler: their
    device events, as plain data, and the device time key_averages shows."""
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    n = 1024
    t = torch.full((n,), float(rank + 1), device="neuron")
    gathered = torch.empty(world_size * n, device="neuron")
    part = torch.empty(n, device="neuron")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p:
        dist.all_reduce(t)
        dist.all_gather_into_tensor(gathered, t)
        dist.reduce_scatter_tensor(part, gathered)
        dist.barrier()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        p.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    cpu = {e["args"]["External id"]: e["name"] for e in trace["traceEvents"]
           if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    events = [{"name": e["name"], "pid": e["pid"], "tid": e["tid"], "bytes": e["args"].get("bytes", 0),
               "modelled_us": e["args"]["modelled us"], "cpu_op": cpu.get(e["args"].get("External id"))}
              for e in trace["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") == "kernel" and e["args"].get("kind") == "collective"]
    device_us = {r.key: r.device_time_total for r in p.key_averages() if r.key.startswith("c10d::")}
    values = [t[0].item(), part[0].item()]
    return {"events": events, "device_us": device_us, "values": values}
