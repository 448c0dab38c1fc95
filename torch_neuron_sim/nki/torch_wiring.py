"""NKI kernels in PyTorch programs, as TorchNeuron wires them:
`torch_neuronx.wrap_nki(kernel)[grid](*args)` and
`torch_neuronx.nki_op(name, fn, mutates_args=...)`.

Every launch goes through one custom op, `nki_sim::launch(key, inputs,
mutated) -> Tensor[]`: `key` names the kernel, its grid and its constant
(non-tensor) arguments; `mutated` holds the inputs the kernel may write
(parameters annotated nki.typing.mutable_tensor, or declared by an enclosing
nki_op's mutates_args), so functionalization and torch.compile see the
writes. Its fake implementation runs the kernel once on meta tensors for the
output shapes (cached per signature), as TorchNeuron runs it under fake
tensors; torch.compile(backend="neuron", fullgraph=True) therefore captures a
launch as one graph node, and the compiled graph launches it.

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


def _kernel_index(func: Callable) -> int:
    with _lock:
        i = _kernel_ids.get(id(func))
        if i is None:
            i = _kernel_ids[id(func)] = len(_kernels)
            _kernels.append(func)  # kept alive: its id stays unique
        return i


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


def _plan(key: str, specs: tuple) -> tuple:
    """(structure of the return value, [(shape, dtype)] of the fresh outputs), by a run on meta tensors.
    The run also checks every rule that depends only on shapes, before the real run touches anything."""
    cached = _plans.get((key, specs))
    if cached is not None:
        return cached
    spec = _specs[key]
    metas = [torch.empty(shape, dtype=getattr(torch, dtype), device="meta") for shape, dtype in specs]
    kwargs = dict(spec.constants)
    kwargs.update(zip(spec.tensor_names, metas))
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    with unset_fake_temporarily():
        result = _kernel.run(spec.func, spec.grid, (), kwargs, device="meta", dry_run=True,
                             declared_mutable=spec.mutated_names)
    ids = {id(m): name for name, m in zip(spec.tensor_names, metas)}
    fresh: list = []

    def shape_of(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            if id(x) in ids:
                return ("input", ids[id(x)])
            fresh.append((tuple(x.shape), x.dtype))
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


@torch.library.custom_op("nki_sim::launch", mutates_args=("mutated",))
def _launch_op(key: str, inputs: list[torch.Tensor], mutated: list[torch.Tensor]) -> list[torch.Tensor]:
    spec = _specs[key]
    tensors = list(inputs) + list(mutated)
    names = [n for n in spec.tensor_names if n not in spec.mutated_names] + list(spec.mutated_names)
    by_name = dict(zip(names, tensors))
    ordered = [by_name[n] for n in spec.tensor_names]
    _plan(key, _arg_specs(ordered))  # shape-level checks first: nothing is written if they fail
    device = _device_of(spec, ordered)
    return run_on(spec, ordered, device)


@_launch_op.register_fake
def _(key: str, inputs: list[torch.Tensor], mutated: list[torch.Tensor]) -> list[torch.Tensor]:
    spec = _specs[key]
    tensors = list(inputs) + list(mutated)
    names = [n for n in spec.tensor_names if n not in spec.mutated_names] + list(spec.mutated_names)
    by_name = dict(zip(names, tensors))
    ordered = [by_name[n] for n in spec.tensor_names]
    _, fresh = _plan(key, _arg_specs(ordered))
    device = ordered[0].device if ordered else torch.device("cpu")
    return [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in fresh]


def run_on(spec: LaunchSpec, tensors: list, device: torch.device) -> list:
    """One launch on real tensors: host views of `neuron` memory, outputs allocated on the device."""
    from .. import _C
    on_device = device.type == "neuron"
    issue_ns = _C._prof_now_ns()
    owners: dict = {}
    if on_device:
        views = [_C._host_alias(t) for t in tensors]

        def factory(shape: tuple, dtype: torch.dtype) -> torch.Tensor:
            out = torch.empty(shape, dtype=dtype, device=device)
            view = _C._host_alias(out)
            owners[id(view)] = out
            return view
    else:
        views, factory = tensors, None
    kwargs = dict(spec.constants)
    kwargs.update(zip(spec.tensor_names, views))
    access = _C._HostAccess() if on_device else _Nothing()
    with access:
        result = _kernel.run(spec.func, spec.grid, (), kwargs, declared_mutable=spec.mutated_names,
                             hbm_factory=factory, name=spec.name)
    if on_device:
        _C._record_named_run(f"nki_{spec.name}")
    _cost.record_launch(spec.name, result.work, device.index if on_device else None, issue_ns, result.sbuf_peak)
    ids = {id(v) for v in views}
    fresh: list = []

    def collect(x: Any) -> None:
        if isinstance(x, torch.Tensor):
            if id(x) not in ids:
                fresh.append(owners.get(id(x), x))
        elif isinstance(x, (tuple, list)):
            for v in x:
                collect(v)

    collect(result.outputs)
    return fresh


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _declared_mutable() -> set:
    if torch.compiler.is_compiling():
        return set()
    return getattr(_tls, "mutable", set())


class NKIKernelCaller:
    """wrap_nki(kernel): `[grid]` fixes the launch grid; calling it launches the kernel."""

    def __init__(self, kernel: Any, grid: tuple = ()) -> None:
        func, own_grid = _kernel.kernel_function(kernel)
        self.kernel = kernel
        self.func = func
        self.grid = grid or own_grid
        self.index = _kernel_index(func)
        sig = inspect.signature(func)
        self.params = tuple(sig.parameters.values())
        self.mutable_params = frozenset(p.name for p in self.params if _kernel._is_mutable_annotation(p.annotation))

    def __getitem__(self, grid: Any) -> "NKIKernelCaller":
        return NKIKernelCaller(self.kernel, _kernel._grid(grid))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        values = {}
        for p, a in zip(self.params, args):
            values[p.name] = a
        if len(args) > len(self.params):
            raise NKIError(f"nki kernel '{self.func.__name__}' takes {len(self.params)} arguments, got {len(args)}")
        for k, v in kwargs.items():
            values[k] = v
        for p in self.params:
            if p.name not in values:
                if p.default is inspect.Parameter.empty:
                    raise NKIError(f"nki kernel '{self.func.__name__}': missing argument '{p.name}'")
                values[p.name] = p.default
        tensor_names, constants, tensors = [], [], []
        declared = _declared_mutable()
        mutated_names = []
        for p in self.params:
            v = values[p.name]
            if isinstance(v, torch.Tensor):
                tensor_names.append(p.name)
                tensors.append(v)
                if p.name in self.mutable_params or (declared and id(v) in declared):
                    mutated_names.append(p.name)
            else:
                constants.append((p.name, v))
        key = _launch_key(self.index, self.grid, tuple(constants), tuple(tensor_names), tuple(mutated_names))
        reads = [t for n, t in zip(tensor_names, tensors) if n not in mutated_names]
        writes = [t for n, t in zip(tensor_names, tensors) if n in mutated_names]
        outs = torch.ops.nki_sim.launch(key, reads, writes)
        structure, _ = _plan(key, _arg_specs(tensors))
        return _rebuild(structure, list(outs), dict(zip(tensor_names, tensors)))


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
    op = torch.library.custom_op(name, call, mutates_args=mutates_args, **kwargs)
    op.register_fake(call)
    return op
