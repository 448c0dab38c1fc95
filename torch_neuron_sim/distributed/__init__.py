"""Distributed training on `neuron`: the c10d backend "neuron".

Importing torch_neuron_sim registers it, in every process (spawned workers and
torchrun's included, since `import torch` autoloads the package):

    dist.init_process_group("neuron")          # or no backend at all: neuron is the accelerator
    dist.init_process_group("cpu:gloo,neuron:neuron")   # CPU tensors share the group through gloo

The backend (csrc/distributed/process_group_neuron.cpp) runs every collective,
and send/recv, on gloo over host views of the device tensors: the bytes already
live in host memory, so nothing is copied. See docs/distributed.md.
"""
from __future__ import annotations

from typing import Any

from .. import _C, environment
from ..devices.device import _select as _select_device, device_count as _device_count

BACKEND = "neuron"


def _local_rank() -> int | None:
    """The local rank a launcher (torchrun, torch.distributed.launch) gave this process."""
    value = environment.setting("LOCAL_RANK")
    if not value.isdigit():
        return None
    return int(value)


def _check_local_rank() -> None:
    """torchrun with more processes per node than visible devices: a clear error."""
    local = _local_rank()
    if local is None:
        return
    count = _device_count()
    if local >= count:
        nproc = environment.setting("LOCAL_WORLD_SIZE", "?")
        raise ValueError(
            f"Device index {local} is out of range. Valid range is 0 to {count - 1}: this process has "
            f"LOCAL_RANK={local} but only {count} neuron device(s) are visible, and each local rank runs on "
            f"neuron:LOCAL_RANK. Start at most {count} processes per node (torchrun --nproc_per_node={count}, "
            f"got {nproc}) or make more devices visible (NEURON_RT_VISIBLE_CORES, NEURON_SIM_CHIPS).")


def _create_backend(store, rank: int, size: int, timeout) -> Any:
    """The factory c10d calls for every group whose device `neuron` maps to
    the "neuron" backend. gloo is built here because torch ships no gloo
    headers; the C++ backend drives it through the c10d::Backend interface."""
    import torch.distributed as dist

    _check_local_rank()
    attempt = environment.setting("TORCHELASTIC_RESTART_COUNT")
    if attempt:
        # torchrun's c10d rendezvous keeps one store across restarts: without a
        # per-attempt prefix a restarted rank can read the address a dead rank
        # of the previous attempt published and fail with "Connection refused".
        store = dist.PrefixStore(f"attempt_{attempt}/", store)
    gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
    # DTensor needs a group, so a neuron group is where DTensor on neuron starts.
    from . import dtensor_ops

    dtensor_ops.install()
    return _C.ProcessGroupNeuron(gloo, store, rank, size, timeout)


def _map_local_rank() -> None:
    """Under a launcher, the process starts on neuron:LOCAL_RANK (out of range
    is reported by init_process_group, not at import)."""
    local = _local_rank()
    if local is not None and environment.setting("WORLD_SIZE") and local < _device_count():
        _select_device(local)


def _install() -> None:
    import torch.distributed as dist

    if not dist.is_available():
        return
    _map_local_rank()
    if "NEURON" in dist.Backend._plugins:
        return
    _C._bind_process_group_neuron()
    dist.Backend.register_backend(BACKEND, _create_backend, devices=["neuron"])


# ---- what ran: collective counts and bytes ----------------------------------------

def collective_counts() -> dict[str, dict[str, int]]:
    """Collectives run by this process since the last clear_op_tracking():
    {"c10d::allreduce_": {"calls": n, "bytes": b}}. Bytes are the message size
    as nccl-tests counts it (docs/distributed.md)."""
    return {name: {"calls": calls, "bytes": nbytes} for name, calls, nbytes in _C._collective_counts()}


def clear_collective_counts() -> None:
    _C._clear_collective_counts()
