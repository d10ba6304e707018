"""Element types of problems and buffers: their names, sizes, host representation and rounding.

A problem's dtype (``float32``, ``float16``, ``bfloat16``) is part of what is tuned, like its shape: it is in the
study name, the stored key and the dispatcher's choice. Buffers may also hold ``int32`` (indices, counts).

numpy has no bfloat16: a bfloat16 buffer lives on the host as ``uint16`` bit patterns. `encode` rounds float
values to a dtype (round to nearest even, as the GPU's conversions do) and returns the host array of its bits;
`decode` turns such an array back into float64 values, exactly. References are computed in float64 from the
decoded (rounded) inputs, so they describe the very numbers the kernel was given.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autotune.errors import InvalidArgument


@dataclass(frozen=True)
class DType:
    name: str  # the user's name, as torch spells it: float32, float16, bfloat16, int32
    short: str  # in study names: f32, f16, bf16, i32
    itemsize: int
    host: str  # numpy dtype of the host array holding it
    code: int  # value of the templates' DTYPE macro (kernel_templates/dtype.cuh)
    poison: int  # bit pattern written over outputs before a run: NaN for floats, INT_MIN for ints
    unit_roundoff: float  # 2^-(significand bits): the relative error of one rounding is at most half this

    @property
    def is_float(self) -> bool:
        return self.name != "int32"


FLOAT32 = DType("float32", "f32", 4, "float32", 0, 0x7FC00000, 2.0**-23)
FLOAT16 = DType("float16", "f16", 2, "float16", 1, 0x7E00, 2.0**-10)
BFLOAT16 = DType("bfloat16", "bf16", 2, "uint16", 2, 0x7FC0, 2.0**-7)
INT32 = DType("int32", "i32", 4, "int32", 3, 0x80000000, 0.0)

DTYPES: dict[str, DType] = {d.name: d for d in (FLOAT32, FLOAT16, BFLOAT16, INT32)}
FLOAT_DTYPES = ("float32", "float16", "bfloat16")

# Other spellings users write (numpy's, C's, short ones).
_ALIASES = {"fp32": "float32", "f32": "float32", "float": "float32", "fp16": "float16", "f16": "float16",
            "half": "float16", "bf16": "bfloat16", "i32": "int32", "int": "int32"}  # fmt: skip


def dtype(name: str) -> DType:
    """The dtype called ``name`` (any usual spelling); `InvalidArgument` when there is none."""
    key = str(name).strip().lower().removeprefix("torch.")
    key = _ALIASES.get(key, key)
    if key not in DTYPES:
        raise InvalidArgument(f"unknown dtype {name!r}; known: {', '.join(DTYPES)}")
    return DTYPES[key]


def canonical(name: str) -> str:
    return dtype(name).name


def _bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 values → bfloat16 bit patterns (round to nearest even; NaN stays NaN)."""
    f = np.ascontiguousarray(values, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    out = rounded.astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        out[nan] = 0x7FC0
    return out


def encode(values: np.ndarray, name: str) -> np.ndarray:
    """Host array of ``values`` rounded to dtype ``name`` (bfloat16: uint16 bit patterns)."""
    d = dtype(name)
    if d.name == "bfloat16":
        return _bf16_bits(np.asarray(values, dtype=np.float32))
    if d.name == "int32":
        return np.asarray(values).astype(np.int32)
    return np.asarray(values).astype(d.host)


def decode(array: np.ndarray, name: str) -> np.ndarray:
    """The float64 values held by a host array of dtype ``name`` (ints stay ints)."""
    d = dtype(name)
    if d.name == "bfloat16":
        bits = np.asarray(array, dtype=np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).astype(np.float64)
    if d.name == "int32":
        return np.asarray(array)
    return np.asarray(array, dtype=np.float64)


def round_to(values: np.ndarray, name: str) -> np.ndarray:
    """``values`` rounded to dtype ``name``, as float64."""
    return decode(encode(values, name), name)


def nbytes(shape: tuple[int, ...], name: str) -> int:
    return int(np.prod(shape, dtype=np.int64)) * dtype(name).itemsize
