"""NKI's dtypes as torch dtypes (so a tile's values are stored as the hardware
stores them), and the conversion from the ways kernels name them (nl, NumPy,
torch, strings)."""
from __future__ import annotations

from typing import Any

import torch

from ..execution.dtype_policy import NARROWED
from .errors import NKIError

bool_ = torch.bool
int8, int16, int32 = torch.int8, torch.int16, torch.int32
uint8, uint16, uint32 = torch.uint8, torch.uint16, torch.uint32
float16, bfloat16, float32 = torch.float16, torch.bfloat16, torch.float32
tfloat32 = torch.float32   # tf32 is an fp32 storage format fed to TensorE at reduced precision
float8_e4m3 = torch.float8_e4m3fn  # the IEEE-like e4m3 (no infinities) torch stores
float8_e4m3fn = torch.float8_e4m3fn
float8_e5m2 = torch.float8_e5m2

_DTYPE_NAMES = {
    "bool": bool_, "bool_": bool_, "int8": int8, "int16": int16, "int32": int32, "uint8": uint8,
    "uint16": uint16, "uint32": uint32, "float16": float16, "bfloat16": bfloat16, "float32": float32,
    "tfloat32": float32, "float8_e4m3": float8_e4m3, "float8_e4m3fn": float8_e4m3fn, "float8_e5m2": float8_e5m2,
    **{str(wide).removeprefix("torch."): narrow for wide, narrow in NARROWED.items()},  # 64-bit host arrays
}


def torch_dtype(dtype: Any) -> torch.dtype:
    """A dtype as nl, numpy, torch or a string names it."""
    if isinstance(dtype, torch.dtype):
        return NARROWED.get(dtype, dtype)  # 64-bit host tensors are 32-bit on the device
    name = getattr(dtype, "__name__", None) or getattr(dtype, "name", None) or str(dtype)
    name = str(name).replace("numpy.", "")
    if name in _DTYPE_NAMES:
        return _DTYPE_NAMES[name]
    raise NKIError(f"dtype {dtype!r} is not an NKI dtype: use nl.bfloat16, nl.float16, nl.float32, nl.float8_e4m3, "
                   "nl.float8_e5m2, nl.int8/16/32, nl.uint8/16/32 or nl.bool_ (the MX x4 types are not simulated)")


