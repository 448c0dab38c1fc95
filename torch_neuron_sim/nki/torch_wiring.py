"""NKI kernels in PyTorch programs, as TorchNeuron wires them:
`torch_neuronx.wrap_nki(kernel)[grid](*args)` and
`torch_neuronx.nki_op(name, fn, mutates_args=...)`.

Every launch goes through one custom op, `nki_sim::launch(key, inputs,
mutated, outputs)`: `key` names the kernel, its grid and its constant
(non-tensor) arguments; `mutated` holds the inputs the kernel may write
(parameters annotated nki.typing.mutable_tensor, or declared by an enclosing
nki_op's mutates_args) and `outputs` the tensors it returns, allocated by the
caller, so functionalization and torch.compile see every write. The output
shapes come from running the kernel once on meta tensors (cached per
signature), as TorchNeuron runs it under fake tensors; Dynamo calls that
planning step as a constant function, so torch.compile(backend="neuron",
fullgraph=True) captures a launch as one graph node, and the compiled graph
launches it.

On `neuron` tensors the kernel reads and writes the arena's bytes through
host views (no copy), outputs are allocated on the device, the launch is
recorded by op tracking as `nki_<kernel name>` and on the device timeline
with its modelled cost. On CPU tensors it runs in the simulator (as
TorchNeuron's CPU simulator path does), recorded on the timeline only."""
from __future__ import annotations

import inspect
import threading
from typing import Any, Callable, Iterable, Optional

import torch

from .. import profiler
from ..execution import adaptive_eager as _adaptive
from . import cost as _cost
from . import kernel as _kernel
from .errors import NKIError

_lock = threading.Lock()
_kernels: list = []               # registered kernel functions; a key's first field indexes it
_kernel_ids: dict = {}            # id(func) -> index
_specs: dict = {}                 # key -> LaunchSpec
_plans: dict = {}                 # (key, argument specs) -> (structure, output specs, written)
_tls = threading.local()          # storages an enclosing nki_op declared mutable


class LaunchSpec:
    """What a key names: the kernel, its grid, its constants and which parameters are tensors."""

    def __init__(self, func: Callable, grid: tuple, constants: dict, tensor_names: tuple,
                 mutated_names: tuple) -> None:
        self.func, self.grid, self.constants = func, grid, constants
        self.tensor_names, self.mutated_names = tensor_names, mutated_names

    @property
    def name(self) -> str:
        return self.func.__name__


@torch._dynamo.assume_constant_result
def _kernel_info(kernel: Any) -> tuple:
    """(kernel index, the kernel's own grid, ((name, default), ...), mutable parameter names).
    A constant for torch.compile: Dynamo calls it once while tracing and keeps the result."""
    func, own_grid = _kernel.kernel_function(kernel)
    with _lock:
        index = _kernel_ids.get(id(func))
        if index is None:
            index = _kernel_ids[id(func)] = len(_kernels)
            _kernels.append(func)  # kept alive: its id stays unique
    params = []
    for p in inspect.signature(func).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise NKIError(f"nki kernel '{func.__name__}': *args / **kwargs parameters are not supported; name "
                           "every parameter")
        params.append((p.name, _NO_DEFAULT if p.default is inspect.Parameter.empty else p.default))
    mutable = tuple(p.name for p in inspect.signature(func).parameters.values()
                    if _kernel._is_mutable_annotation(p.annotation))
    return index, own_grid, tuple(params), mutable


_NO_DEFAULT = "<no default>"


@torch._dynamo.assume_constant_result
def _launch_key(kernel_index: int, grid: tuple, constants: tuple, tensor_names: tuple,
                mutated_names: tuple) -> str:
    key = f"{kernel_index}|{grid}|{constants!r}|{tensor_names}|{mutated_names}"
    with _lock:
        if key not in _specs:
            _specs[key] = LaunchSpec(_kernels[kernel_index], grid, dict(constants), tensor_names, mutated_names)
    return key


def _arg_specs(tensors: Iterable[torch.Tensor]) -> tuple:
    return tuple((tuple(t.shape), str(t.dtype).replace("torch.", "")) for t in tensors)


@torch._dynamo.assume_constant_result
def _plan(key: str, specs: tuple) -> tuple:
    """(structure of the return value, ((shape, dtype, allocation number), ...) of its fresh
    outputs), by a run on meta tensors. The run also checks every rule that depends only on
    shapes, before the real run touches anything."""
    cached = _plans.get((key, specs))
    if cached is not None:
        return cached
    spec = _specs[key]
    allocations: list = []

    def factory(shape: tuple, dtype: torch.dtype) -> torch.Tensor:
        allocations.append(torch.empty(shape, dtype=dtype, device="meta"))
        return allocations[-1]

    from torch._subclasses.fake_tensor import unset_fake_temporarily
    with unset_fake_temporarily():  # plain meta tensors, whatever mode the caller traces under
        metas = [torch.empty(shape, dtype=getattr(torch, dtype), device="meta") for shape, dtype in specs]
        kwargs = dict(spec.constants)
        kwargs.update(zip(spec.tensor_names, metas))
        result = _kernel.run(spec.func, spec.grid, (), kwargs, device="meta", dry_run=True,
                             declared_mutable=spec.mutated_names, hbm_factory=factory)
    inputs = {id(m): name for name, m in zip(spec.tensor_names, metas)}
    numbers = {id(t): i for i, t in enumerate(allocations)}
    fresh: list = []

    def shape_of(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            if id(x) in inputs:
                return ("input", inputs[id(x)])
            fresh.append((tuple(x.shape), x.dtype, numbers[id(x)]))
            return ("output", len(fresh) - 1)
        if isinstance(x, (tuple, list)):
            return (type(x).__name__, tuple(shape_of(v) for v in x))
        return ("constant", x)

    structure = shape_of(result.outputs)
    unmarked = [n for n in result.written_inputs if n not in spec.mutated_names]
    if unmarked:
        raise NKIError(f"nki kernel '{spec.name}' writes input '{unmarked[0]}', which is immutable: inputs are "
                       f"immutable unless marked mutable. Declare it (nki_op(..., mutates_args={{'{unmarked[0]}'}}) "
                       "or annotate the parameter nki.typing.mutable_tensor), or write to an output allocated in "
                       "nl.shared_hbm")
    plan = (structure, tuple(fresh))
    _plans[(key, specs)] = plan
    return plan


def _rebuild(structure: Any, outputs: list, inputs: dict) -> Any:
    kind, value = structure
    if kind == "input":
        return inputs[value]
    if kind == "output":
        return outputs[value]
    if kind in ("tuple", "list"):
        items = [_rebuild(s, outputs, inputs) for s in value]
        return tuple(items) if kind == "tuple" else items
    return value


def _device_of(spec: LaunchSpec, tensors: list) -> torch.device:
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        names = ", ".join(f"'{n}' on {t.device}" for n, t in zip(spec.tensor_names, tensors))
        raise NKIError(f"nki kernel '{spec.name}': tensor arguments are on different devices ({names}); pass all "
                       "of them on one device (.to('neuron'))")
    return devices.pop() if devices else torch.device("cpu")


def _ordered(spec: LaunchSpec, inputs: list, mutated: list) -> list:
    names = [n for n in spec.tensor_names if n not in spec.mutated_names] + list(spec.mutated_names)
    by_name = dict(zip(names, list(inputs) + list(mutated)))
    return [by_name[n] for n in spec.tensor_names]


# A kernel for the CPU and for `neuron` (PrivateUse1), so a compiled graph holding it is the device's own.
@torch.library.custom_op("nki_sim::launch", mutates_args=("mutated", "outputs"), device_types=("cpu", "neuron"))
def _launch_op(key: str, inputs: list[torch.Tensor], mutated: list[torch.Tensor],
               outputs: list[torch.Tensor]) -> None:
    """Runs the kernel `key` names; writes `mutated` in place and its results into `outputs`
    (allocated by the caller from the plan: a custom op that writes its arguments cannot also
    return a list of tensors to torch.compile)."""
    spec = _specs[key]
    ordered = _ordered(spec, inputs, mutated)
    device = _device_of(spec, ordered + list(outputs))
    _, fresh = _plan(key, _arg_specs(ordered))  # shape-level checks first: nothing is written if they fail
    run_on(spec, ordered, device, list(outputs), [number for _, _, number in fresh])


@_launch_op.register_fake
def _(key: str, inputs: list[torch.Tensor], mutated: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
    return None


def run_on(spec: LaunchSpec, tensors: list, device: torch.device, outputs: list, numbers: list) -> None:
    """One launch on real tensors: `neuron` memory through host views (no copies); the
    kernel's returned outputs are `outputs` (allocation number numbers[j] is outputs[j])."""
    from .. import _C
    on_device = device.type == "neuron"
    if on_device:
        _adaptive.flush_for_kernel_call()  # the kernel is a NEFF of its own: adaptive eager's open runs end here
    issue_ns = profiler.now_ns()
    host = (lambda t: _C._host_alias(t)) if on_device else (lambda t: t)
    views = [host(t) for t in tensors]
    returned = {n: host(t) for n, t in zip(numbers, outputs)}
    count = [0]

    def factory(shape: tuple, dtype: torch.dtype) -> torch.Tensor:
        i = count[0]
        count[0] += 1
        out = returned.get(i)
        return out if out is not None else torch.empty(shape, dtype=dtype)  # HBM scratch the caller never sees

    kwargs = dict(spec.constants)
    kwargs.update(zip(spec.tensor_names, views))
    with (_C._HostAccess() if on_device else _Nothing()):
        result = _kernel.run(spec.func, spec.grid, (), kwargs, declared_mutable=spec.mutated_names,
                             hbm_factory=factory, name=spec.name)
    if on_device:
        _C._record_named_run(f"nki_{spec.name}")
    _cost.record_launch(spec.name, result.work, device.index if on_device else None, issue_ns, result.sbuf_peak)


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _declared_mutable() -> set:
    if torch.compiler.is_dynamo_compiling():
        return set()  # Dynamo traces the call: an nki_op's body is run later, under fake tensors
    return getattr(_tls, "mutable", set())


class NKIKernelCaller:
    """wrap_nki(kernel): `[grid]` fixes the launch grid; calling it launches the
    kernel. Written so that Dynamo traces it into one `nki_sim::launch` node:
    everything about the kernel is computed by constant functions."""

    def __init__(self, kernel: Any, grid: tuple = ()) -> None:
        self.kernel = kernel
        self.grid = grid

    def __getitem__(self, grid: Any) -> "NKIKernelCaller":
        items = grid if isinstance(grid, (tuple, list)) else (grid,)
        return NKIKernelCaller(self.kernel, tuple(int(g) for g in items))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        index, own_grid, params, mutable = _kernel_info(self.kernel)
        grid = self.grid or own_grid
        if len(args) > len(params):
            raise NKIError(f"nki kernel takes {len(params)} arguments, got {len(args)}")
        values = {}
        for (name, default), a in zip(params, args):
            values[name] = a
        for k, v in kwargs.items():
            values[k] = v
        tensor_names, constants, tensors, mutated_names = [], [], [], []
        declared = _declared_mutable()
        for name, default in params:
            if name not in values:
                if default == _NO_DEFAULT:
                    raise NKIError(f"nki kernel: missing argument '{name}'")
                values[name] = default
            v = values[name]
            if isinstance(v, torch.Tensor):
                tensor_names.append(name)
                tensors.append(v)
                if name in mutable or (declared and id(v) in declared):
                    mutated_names.append(name)
            else:
                constants.append((name, v))
        key = _launch_key(index, grid, tuple(constants), tuple(tensor_names), tuple(mutated_names))
        reads = [t for n, t in zip(tensor_names, tensors) if n not in mutated_names]
        writes = [t for n, t in zip(tensor_names, tensors) if n in mutated_names]
        structure, fresh = _plan(key, _arg_specs(tensors))
        device = tensors[0].device if tensors else torch.device("cpu")
        outs = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype, _ in fresh]
        torch.ops.nki_sim.launch(key, reads, writes, outs)
        return _rebuild(structure, outs, dict(zip(tensor_names, tensors)))


def wrap_nki(kernel: Any = None, **kwargs: Any) -> Any:
    """torch_neuronx.wrap_nki: as a call (`wrap_nki(kernel)[grid](*args)`) or a decorator above @nki.jit."""
    if kernel is None:
        return lambda k: NKIKernelCaller(k)
    return NKIKernelCaller(kernel)


class _MutableScope:
    def __init__(self, tensors: Iterable[torch.Tensor]) -> None:
        self.ids = {id(t) for t in tensors}

    def __enter__(self) -> None:
        self.outer = getattr(_tls, "mutable", set())
        _tls.mutable = self.outer | self.ids

    def __exit__(self, *exc: Any) -> None:
        _tls.mutable = self.outer


def nki_op(name: str, fn: Optional[Callable] = None, mutates_args: Any = (), **kwargs: Any) -> Any:
    """torch_neuronx.nki_op: `fn` (typed; it calls NKI kernels through wrap_nki)
    as a torch.library custom op `name` ("namespace::op"). Returns the op
    (`.register_autograd`, `.register_fake`); its fake implementation is `fn`
    itself, run on fake tensors. Inputs in `mutates_args` may be written by
    the kernels `fn` launches."""
    if fn is None:
        return lambda f: nki_op(name, f, mutates_args=mutates_args, **kwargs)
    if "::" not in name:
        raise ValueError(f"nki_op name '{name}' must be 'namespace::name' (as torch.library.custom_op requires)")
    mutable = frozenset(mutates_args if not isinstance(mutates_args, str) else ())
    sig = inspect.signature(fn)

    def call(*args: Any, **kw: Any) -> Any:
        bound = sig.bind(*args, **kw)
        declared = [v for k, v in bound.arguments.items() if k in mutable and isinstance(v, torch.Tensor)]
        with _MutableScope(declared):
            return fn(*args, **kw)

    call.__signature__ = sig
    call.__name__ = fn.__name__
    call.__annotations__ = dict(getattr(fn, "__annotations__", {}))
    kwargs.setdefault("device_types", ("cpu", "neuron"))  # the device's own op in a compiled graph
    op = torch.library.custom_op(name, call, mutates_args=mutates_args, **kwargs)
    op.register_fake(call)
    return op
