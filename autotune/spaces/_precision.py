"""dtype rules the library's memory-bound spaces share (rows, reductions, elementwise, GEMV, dot).

Every one of them loads and stores float32, float16 or bfloat16 and computes in fp32 (`kernel_templates/common.cuh`
converts in registers). So:

* An output held in fp32 (statistics such as LayerNorm's mean and rstd, a sum) keeps the space's fp32 tolerance.
* An output held in a half type is held to `HALF_TOLERANCE`, a relative-norm error about 3.5 times what rounding
  the exact result to that type costs (≈ 0.29 × its epsilon in RMS: 2.8e-4 for float16, 2.3e-3 for bfloat16).
  An fp32-accumulating kernel meets it; one that accumulates a row's statistics in the half type does not (on
  the validation rows of a few thousand columns its sums lose whole units: tests/test_spaces_library.py
  simulates both and checks the tolerance separates them).
* References are float64 over the decoded (rounded) inputs the kernel was given (`KernelSpace.decoded_inputs`).
"""

from __future__ import annotations

from typing import Any, Mapping

from autotune import dtypes
from autotune.errors import InvalidType

HALF_TOLERANCE = {"float16": 1e-3, "bfloat16": 8e-3}
VECTOR_BYTES = 16  # the widest global access: a float4, or 8 halves


def output_tolerance(dtype: str, fp32_tolerance: float) -> float:
    """The tolerance of an output held in ``dtype`` whose fp32 computation is held to ``fp32_tolerance``."""
    return max(HALF_TOLERANCE.get(dtype, 0.0), fp32_tolerance)


def dtype_code(dtype: str) -> int:
    """The value of the templates' DTYPE / WDTYPE macro for ``dtype``."""
    return dtypes.dtype(dtype).code


def widest_vec(dtype: str, length: int, choices: tuple[int, ...]) -> int:
    """The widest vector (elements per access, at most 16 bytes) among ``choices`` that divides ``length``: rows
    of that length keep every row start aligned to it, so the vector path runs on every row."""
    itemsize = dtypes.dtype(dtype).itemsize
    fitting = [v for v in choices if v * itemsize <= VECTOR_BYTES and length % v == 0]
    return max(fitting) if fitting else min(choices)


def infer_dtype_by_specs(cls: Any, given: Mapping[str, str], hint: str = "") -> str:
    """The problem dtype of a space whose inputs need not all share it (fp32 statistics beside half x, fp32
    weights in a `_mixed` variant): the first input's dtype picks the problem, then every input must have the
    dtype the space's `input_specs` give it there. `InvalidType` names the first argument that does not;
    ``hint`` is added where a weight's dtype is what differs (e.g. which variant takes fp32 weights)."""
    names = list(given)
    first, problem = names[0], given[names[0]]
    supported = cls.supported_dtypes()
    if problem not in supported:
        raise InvalidType(f"{first} has dtype {problem}; {cls.name} supports {', '.join(supported)}")
    space = cls(dtype=problem)
    specs = space.input_specs(space.default_shape)
    for name in names[1:]:
        want = specs[name].dtype
        if given[name] != want:
            extra = f" ({hint})" if hint and name in ("weight", "bias") else ""
            raise InvalidType(f"{name} has dtype {given[name]} but {cls.name} with {first} in {problem} needs "
                              f"{name} in {want}{extra}")  # fmt: skip
    return problem
