"""The native-op set: which ATen ops run "on device" and which take the
tracked CPU fallback.

The set is a data file per release of the real backend (one operator
overload a line). The default models TorchNeuron's public beta; users can
extend it or replace it to model a newer release:

    torch_neuron_sim.native_ops.extend(["aten::cumprod"])
    torch_neuron_sim.native_ops.load("my-release.txt")       # replace
    NEURON_SIM_NATIVE_OPS=/path/to/table.txt python train.py  # replace, at import
"""
from __future__ import annotations

import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

import torch

from ... import _C, torch_versions
from ... import environment

DEFAULT_TABLE = torch_versions.current().native_ops  # chosen by the running torch's version
_HERE = Path(__file__).parent

# Composite ops that must stay composite on neuron: copies route to our
# _copy_from kernel, and a device-changing op would be given a CPU device.
# rms_norm has its own kernel (emulated_kernels.cpp), on the autograd key too.
_NEVER_DIRECT = {"aten::_to_copy", "aten::copy_", "aten::to", "aten::rms_norm"}
# Composite ops in the table that the device never reaches: PyTorch
# decomposes them before the backend (tracking.rules records the constituent).
_DECOMPOSED_ON_DEVICE = {"aten::softmax.int", "aten::log_softmax.int"}
RULES = _HERE / "tracking.rules"
# Composite ops the real backend implements with a C++ kernel of its own
# (registered in its csrc/core/NeuronBindings.cpp);
# not differentiable, so a direct kernel cannot bypass any autograd formula.
_ALWAYS_DIRECT = {"aten::argsort.stable"}

_state = {"version": None, "registered": set()}


# An operator overload's name as the dispatcher spells it: namespace::name[.overload].
_OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")


def _checked(name: str, where: str) -> str:
    full = name if "::" in name else f"aten::{name}"
    if not _OP_NAME.fullmatch(full):
        raise ValueError(f"{where}: {name!r} is not an operator name such as 'aten::relu' or 'aten::add.out'")
    return full


def read_table(path: str | os.PathLike) -> list[str]:
    """Operator names listed in a table file (comments and blanks skipped)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"native-op table {path} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    names = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(_checked(line, f"native-op table {path}, line {number}"))
    return names


def _split(name: str) -> tuple[str, str]:
    base, _, overload = name.partition(".")
    return base, overload


def _needs_direct_kernel(name: str) -> bool:
    # Ops with only backend kernels (CPU, CUDA...) reach our PrivateUse1
    # fallback on their own. An op with a CompositeExplicitAutograd[NonFunctional]
    # kernel never would: that kernel serves every backend without one of its
    # own (e.g. native_layer_norm would run its batch-norm-based math version;
    # add.Tensor would allocate and call add.out), so native ops of that kind
    # get the native kernel registered directly. CompositeImplicitAutograd
    # ops the device registers (linear, isfinite, one_hot, _fused_rms_norm...)
    # run as one op too: their autograd is PyTorch's formula where one exists
    # (linear's backward is linear_backward), else none (_autograd_passthrough).
    if name in _NEVER_DIRECT or name in _DECOMPOSED_ON_DEVICE:
        return False
    if name in _ALWAYS_DIRECT:
        return True
    base, overload = _split(name)
    try:
        torch._C._dispatch_find_schema_or_throw(base, overload)
    except RuntimeError:
        return False
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    full = name
    if has(full, "PrivateUse1") and full not in _state["registered"]:
        # The device has a kernel of its own (a factory, a view, a copy): a table
        # naming the op must not replace it with the native path's CPU kernel.
        return False
    if has(full, "CPU"):
        # A CPU kernel means autograd on CPU already comes from a derivative
        # formula, not from the composite: the same holds for neuron. (This
        # catches ops like silu_backward, which also carry a composite math
        # version that would run on neuron with different rounding.)
        return True
    explicit = has(full, "CompositeExplicitAutograd") or has(full, "CompositeExplicitAutogradNonFunctional")
    return explicit or has(full, "CompositeImplicitAutograd")


def _autograd_passthrough(name: str) -> bool:
    # A composite op with no autograd formula, registered on the device: the
    # device's autograd key passes it through, so its outputs have no grad_fn.
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return has(name, "CompositeImplicitAutograd") and not has(name, "Autograd")


def read_rules(path: str | os.PathLike = RULES) -> list[tuple[str, str, str | None, str]]:
    """The rules of a tracking.rules file: (kind, op, value or None, reason)."""
    out = []
    reason, block, header = "", False, False  # a block of comment lines is the reason of the rules below it
    for raw in Path(path).read_text().splitlines():
        line = raw.strip()
        if line.startswith("#"):
            text = line.lstrip("#").strip()
            if not text:
                block = header = False
            elif text.startswith("KIND") or header:  # a KIND block describes the kind, not rules
                header = True
            else:
                reason = f"{reason} {text}" if block else text
                block = True
            continue
        header = False
        block = False
        if not line:
            continue
        body, _, note = line.partition("#")
        parts = body.split()
        kind, op, value = parts[0], parts[1], (parts[2] if len(parts) > 2 else None)
        if kind not in ("record", "never", "exempt", "inputs"):
            raise ValueError(f"{path}: unknown rule kind {kind!r} in {raw!r}")
        out.append((kind, op, value, note.strip() or reason))
    return out


def _apply_rules(path: str | os.PathLike = RULES) -> None:
    rules = read_rules(path)
    _C._set_tracking_rules({op: v for k, op, v, _ in rules if k == "record"},
                           [op for k, op, _, _ in rules if k == "never"],
                           [op for k, op, _, _ in rules if k == "exempt"],
                           {op: v for k, op, v, _ in rules if k == "inputs"})


def _structured_functionals(native: list[str]) -> list[str]:
    """Non-native functional and in-place variants of structured ops.

    Such an op (mse_loss, smooth_l1_loss, atan2, ...) has a generated
    CompositeExplicitAutogradNonFunctional kernel that serves any backend
    without its own: it allocates the result on the device and calls the
    op's out= variant, which then falls back to the CPU with a preallocated
    output (the CPU kernel may resize it, with a warning CPU code never
    prints) and is tracked under the out= name. Registered with the
    device kernel instead, the fallback runs the functional CPU kernel, as on
    the CPU, and reports the functional name. Ops with any native overload
    keep the composite, which reaches the native out= variant (in-place ones
    too: addcdiv_ runs the native addcdiv.out).
    """
    def family(name: str) -> str:  # addcdiv_ (in-place) belongs with addcdiv and addcdiv.out
        base = _split(name)[0]
        return base[:-1] if base.endswith("_") and not base.endswith("__") else base

    native_bases = {family(n) for n in native}
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    out = []
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::") or not has(name, "CompositeExplicitAutogradNonFunctional"):
            continue
        if family(name) in native_bases or name in _NEVER_DIRECT:
            continue
        own = name in _state["registered"]  # a kernel an earlier set had registered still counts as absent
        if has(name, "CPU") and (own or not has(name, "PrivateUse1")) and not has(name, "CompositeImplicitAutograd"):
            out.append(name)
    return out


def _apply(names: list[str], version: str, keep: bool = False) -> None:
    """Make `names` the native set, with exactly the device kernels it needs
    (with `keep`, also the ones registered before).

    Kernels an earlier set needed and this one does not go away: left in
    place, they would reroute ops for good (after a set without clamp,
    clamp_.Tensor would fall back under its own name instead of reaching the
    native clamp.Tensor_out)."""
    _C._set_native_ops(names)
    needed = [n for n in names if _needs_direct_kernel(n)]
    needed += sorted(set(_structured_functionals(names)) - set(needed))
    stale = set() if keep else _state["registered"] - set(needed)
    if stale:
        _C._remove_native_kernels(sorted(stale))
        _state["registered"] -= stale
    direct = [n for n in needed if n not in _state["registered"]]
    if direct:
        _C._register_native_kernels(direct)
        _C._register_autograd_passthrough([n for n in direct if _autograd_passthrough(n)])
        _state["registered"].update(direct)
    _state["version"] = version


def load(table: str | os.PathLike = DEFAULT_TABLE) -> None:
    """Replace the native set with a bundled table (by name) or a file."""
    path = _HERE / f"{table}.txt"
    if not path.exists():
        path = Path(table)
        if not path.exists():
            bundled = ", ".join(sorted(p.stem for p in _HERE.glob("*.txt")))
            raise FileNotFoundError(f"native-op table '{table}' is neither a bundled table ({bundled}) nor a file")
    _apply(read_table(path), path.stem)


def extend(names: Iterable[str]) -> None:
    """Add ops (e.g. "aten::cumprod" or "aten::cumprod.out") to the native set."""
    extra = [_checked(n, "native_ops.extend") for n in names]
    _apply(sorted(set(_C._native_ops()) | set(extra)), f"{_state['version']}+custom")


@contextmanager
def override(names: Iterable[str]) -> Iterator[None]:
    """Within the block, exactly `names` are native (direct kernels registered
    as load() does); the table in use before is restored on exit.

        with native_ops.override([]):              # every op takes the fallback
        with native_ops.override(current() + ["aten::cumprod"]):

    The kernels of the table in use stay registered in the block, so an op
    it runs as one kernel (linear) falls back as that one op under
    override([]) instead of decomposing: the block runs the same ops, each on
    the other path, which is what a parity check compares.
    """
    saved, saved_version = current(), _state["version"]
    try:
        _apply(sorted({_checked(n, "native_ops.override") for n in names}), f"{saved_version}+override", keep=True)
        yield
    finally:
        _apply(saved, saved_version)  # the block's own kernels go with it


def current() -> list[str]:
    """The operator names now in the native set, sorted."""
    return sorted(_C._native_ops())


def emulated_kernels() -> list[str]:
    """Native ops PyTorch has no CPU kernel for that the emulator computes with
    a kernel of its own (linear_backward, the batch_norm_* helpers...), and
    ops whose device behaviour differs from the CPU kernel's."""
    return sorted(_C._host_kernel_names())


def registered() -> list[str]:
    """The ops the device registers a kernel for, as TorchNeuron's registry
    would list them: the table in use, less the composites PyTorch decomposes
    before the device sees them, plus the emulator's own C++ kernels."""
    kernels = {n for n in torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1") if n.startswith("aten::")}
    return sorted((set(current()) - _DECOMPOSED_ON_DEVICE) | kernels)


def version() -> str:
    """The name of the table in use, e.g. 'torchneuron-2.14-beta'."""
    return _state["version"]


def _load_default() -> None:
    _apply_rules()
    load(environment.setting("NEURON_SIM_NATIVE_OPS") or DEFAULT_TABLE)
