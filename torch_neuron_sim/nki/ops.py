"""The operations kernels name: elementwise (nl.exp, nl.add...) and
reductions (nl.sum, nl.max...), each with its math on fp32 torch tensors.
They are the `op` of ISA instructions and, as nl's functions (nki.language
makes them callable), return new tiles. Legacy kernels pass NumPy ufuncs
(np.add, np.exp): `lookup` finds the operation of the same name."""
from __future__ import annotations

from typing import Any, Optional

import torch
import torch.nn.functional as F

from .memory import NkiTensor


class Op:
    """An elementwise or reduction operation: `fn` is its math on fp32 tensors."""

    def __init__(self, name: str, kind: str, fn: Any, reduce: Any = None) -> None:
        self.name = name
        self.kind = kind      # "unary", "binary" or "reduce"
        self.fn = fn
        self.reduce = reduce  # for binary ops that reduce (add -> sum) and reductions: fn(t, dims, keepdim)
        self.__name__ = name

    def __repr__(self) -> str:
        return f"nl.{self.name}"


def _gelu_tanh(t: torch.Tensor) -> torch.Tensor:
    return F.gelu(t, approximate="tanh")


_UNARY = {
    "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "tanh": torch.tanh,
    "sigmoid": torch.sigmoid, "relu": torch.relu, "gelu": F.gelu, "gelu_apprx_tanh": _gelu_tanh,
    "silu": F.silu, "square": torch.square, "reciprocal": torch.reciprocal, "abs": torch.abs,
    "negative": torch.neg, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "arctan": torch.atan,
    "erf": torch.erf, "sign": torch.sign, "softplus": F.softplus, "mish": F.mish, "floor": torch.floor,
    "ceil": torch.ceil, "trunc": torch.trunc, "exp2": torch.exp2, "log2": torch.log2,
    "bypass": lambda t: t, "identity": lambda t: t, "invert": torch.bitwise_not,
    "logical_not": torch.logical_not,
}
_BINARY = {
    "add": (torch.add, lambda t, d, k: torch.sum(t, d, keepdim=k)),
    "subtract": (torch.sub, None),
    "multiply": (torch.mul, lambda t, d, k: torch.prod(t, d[0], keepdim=k) if len(d) == 1 else
                 torch.prod(t.flatten(d[0]), d[0], keepdim=False)),
    "divide": (torch.div, None),
    "maximum": (torch.maximum, lambda t, d, k: torch.amax(t, d, keepdim=k)),
    "minimum": (torch.minimum, lambda t, d, k: torch.amin(t, d, keepdim=k)),
    "power": (torch.pow, None), "fmod": (torch.fmod, None), "mod": (torch.remainder, None),
    "equal": (torch.eq, None), "not_equal": (torch.ne, None), "greater": (torch.gt, None),
    "greater_equal": (torch.ge, None), "less": (torch.lt, None), "less_equal": (torch.le, None),
    "logical_and": (torch.logical_and, None), "logical_or": (torch.logical_or, None),
    "logical_xor": (torch.logical_xor, None), "bitwise_and": (torch.bitwise_and, None),
    "bitwise_or": (torch.bitwise_or, None), "bitwise_xor": (torch.bitwise_xor, None),
}
_REDUCE = {
    "sum": lambda t, d, k: torch.sum(t, d, keepdim=k),
    "max": lambda t, d, k: torch.amax(t, d, keepdim=k),
    "min": lambda t, d, k: torch.amin(t, d, keepdim=k),
    "mean": lambda t, d, k: torch.mean(t, d, keepdim=k),
    "var": lambda t, d, k: torch.var(t, d, keepdim=k, unbiased=False),
    "prod": lambda t, d, k: torch.prod(t.flatten(d[0]), d[0], keepdim=k) if len(d) > 1 else
    torch.prod(t, d[0], keepdim=k),
    "all": lambda t, d, k: torch.amin(t != 0, d, keepdim=k),
    "any": lambda t, d, k: torch.amax(t != 0, d, keepdim=k),
}


REGISTRY: dict = {}  # name -> Op (nki.language replaces them with its callable ones)
for _name, _fn in _UNARY.items():
    REGISTRY[_name] = Op(_name, "unary", _fn)
for _name, (_fn, _red) in _BINARY.items():
    REGISTRY[_name] = Op(_name, "binary", _fn, _red)
for _name, _fn in _REDUCE.items():
    REGISTRY[_name] = Op(_name, "reduce", None, _fn)
del _name, _fn

# NumPy's names (legacy kernels pass np.* ufuncs) and nl.copy as an activation.
_ALIASES = {"copy": "bypass", "true_divide": "divide", "amax": "max", "amin": "min", "max": "maximum",
            "min": "minimum"}


def lookup(op: Any) -> Optional[Op]:
    if isinstance(op, Op):
        return op
    name = getattr(op, "__name__", None)
    if name is None:
        return None
    return REGISTRY.get(_ALIASES.get(name, name))


def result_dtype(*xs: Any) -> torch.dtype:
    tiles = [x.dtype for x in xs if isinstance(x, NkiTensor)]
    if not tiles:
        return torch.float32
    floats = [d for d in tiles if d.is_floating_point]
    if floats:
        if len(set(floats)) == 1:
            return floats[0]
        if set(floats) == {torch.float16, torch.bfloat16}:
            return torch.float32  # fp16 with bf16: neither holds the other
        return max(floats, key=lambda d: d.itemsize)
    out = tiles[0]
    for d in tiles[1:]:
        out = torch.promote_types(out, d)
    return out
