"""One kernel launch as the simulator runs it: the hardware generation's
limits, the on-chip memory in use (SBUF bytes and PSUM banks per partition),
the work each engine was given (for the cost model), and where in the grid
this instance is. A thread runs one launch at a time; instances of a grid run
one after another, as AWS's simulator runs them."""
from __future__ import annotations

import threading
from typing import Optional

import torch

from .errors import NKIError
from .limits import Limits

ENGINES = ("tensor", "vector", "scalar", "gpsimd", "dma")


class EngineWork:
    """What one launch asked of each engine: instructions, and per engine the
    quantity its time depends on (TensorE FLOPs per math class, DMA bytes,
    elements per partition for the others)."""

    __slots__ = ("instructions", "cycles_elems", "flops", "dma_bytes", "hbm_bytes")

    def __init__(self) -> None:
        self.instructions = dict.fromkeys(ENGINES, 0)
        self.cycles_elems = dict.fromkeys(("vector", "scalar", "gpsimd", "tensor"), 0.0)
        self.flops = {"float8": 0.0, "bfloat16": 0.0, "float32": 0.0}
        self.dma_bytes = 0.0
        self.hbm_bytes = 0.0


class Launch:
    def __init__(self, kernel_name: str, limits: Limits, grid: tuple, device: str = "cpu",
                 check_capacity: bool = True) -> None:
        self.kernel_name = kernel_name
        self.limits = limits
        self.grid = grid
        # Where tiles live: "cpu", or "meta" when only shapes are wanted (a torch.device: not parsed per tile).
        self.device = torch.device(device)
        self.check_capacity = check_capacity
        self.program = (0,) * len(grid)
        self.sbuf_used = 0            # bytes per partition
        self.sbuf_peak = 0
        self.psum_banks_used = 0
        self.work = EngineWork()
        self.instruction = ""         # the instruction running (for messages)
        self.writable: Optional[set] = None  # storages of inputs the caller declared mutable
        self.written_inputs: set = set()      # positions of inputs the kernel wrote
        self.dry_run = False          # a run for shapes only: writes to inputs are recorded, not refused
        self.hbm_factory = None       # allocates HBM outputs: (shape, dtype) -> (tile tensor, caller's tensor)
        self.outputs: dict = {}       # id(tile tensor) -> caller's tensor, for HBM outputs
        self.shared: list = []        # a grid's nl.shared_hbm tensors, in allocation order
        self.shared_next = 0          # the next one this instance allocates
        self.footprints: dict = {}    # (shape, dtype, buffer) as a kernel passes them -> memory.allocate's checked plan

    def where(self) -> str:
        if not self.grid:
            return ""
        return f", instance program_id={self.program if len(self.program) > 1 else self.program[0]}"

    def count(self, engine: str, elems_per_partition: float = 0.0) -> None:
        self.work.instructions[engine] += 1
        if engine in self.work.cycles_elems:
            self.work.cycles_elems[engine] += elems_per_partition


_tls = threading.local()  # the launch this thread is running, if any


def current_or_none() -> Optional[Launch]:
    return getattr(_tls, "launch", None)


def current() -> Launch:
    launch = current_or_none()
    if launch is None:
        raise NKIError("NKI language and ISA calls run only inside a kernel: call the kernel through "
                       "torch_neuronx.wrap_nki(kernel)[grid](...), nki.simulate(kernel)(...), or call an "
                       "@nki.jit kernel with tensors")
    return launch


class active:
    """Context manager making `launch` the thread's current launch."""

    def __init__(self, launch: Launch) -> None:
        self.launch = launch

    def __enter__(self) -> Launch:
        self.outer = current_or_none()
        if self.outer is not None:
            raise NKIError(f"kernel '{self.launch.kernel_name}' launched from inside kernel "
                           f"'{self.outer.kernel_name}': NKI kernels do not call other kernels; "
                           "call the inner one as a plain Python function instead")
        _tls.launch = self.launch
        return self.launch

    def __exit__(self, *exc) -> None:
        _tls.launch = self.outer


def fail(instruction: str, message: str, hint: str = "") -> NKIError:
    """The error of an instruction that broke a rule, naming the kernel (and grid
    instance) this thread is running, if any, and what to do."""
    launch = current_or_none()
    where = f" (kernel '{launch.kernel_name}'{launch.where()})" if launch is not None else ""
    text = f"{instruction}: {message}{where}"
    if hint:
        text += f". {hint}"
    return NKIError(text)
