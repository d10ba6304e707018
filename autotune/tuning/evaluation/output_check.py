"""Checking a candidate's outputs on the device: poisoned before the run, then every element compared with its
fp64 reference by relative norm (compare.cu), NaN and inf counted."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from autotune import dtypes
from autotune.shape import format_shape
from autotune.spaces.base import UNIFORM
from autotune.tuning.evaluation.validation_data import DataSet


class CandidateFailed(Exception):
    """A candidate's outputs are wrong (``kind`` "wrong" or "nan"): a measurement that failed, not an error."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


class OutputCheck:
    """The compare kernels and their result buffers, on one stream (see the module)."""

    def __init__(self, cuda: Any, stream: Any, compare_cubin: str, sm_count: int) -> None:
        """``compare_cubin``: compare.cu built for this device (one compare kernel per output dtype)."""
        self.cuda = cuda
        self.stream = stream
        self.sm_count = sm_count
        compare_module = cuda.module_from_file(compare_cubin)
        self.compares: dict[str, Any] = {}
        for name in dtypes.DTYPES:
            function = compare_module.get_function(f"compare_{dtypes.dtype(name).short}_f64")
            function.prepare("PPQPP")
            self.compares[name] = function
        self._compare_module = compare_module
        self.sums = cuda.mem_alloc(16)
        self.bad = cuda.mem_alloc(8)

    def poison(self, data: DataSet) -> None:
        """Fill the outputs with NaN: an element the candidate does not write fails the check."""
        for name, spec in data.outputs.items():
            alloc, _ = data.buffers[name]
            d = dtypes.dtype(spec.dtype)
            n = int(np.prod(spec.shape))
            if d.itemsize == 4:
                self.cuda.memset_d32_async(alloc, d.poison, n, self.stream)
            else:
                self.cuda.memset_d16_async(alloc, d.poison, n, self.stream)

    def check(self, data: DataSet) -> float:
        """Compare every output with its reference; raise CandidateFailed; return the largest relative error."""
        worst = 0.0
        for name, (rel, zero_ref, where) in self.errors(data).items():
            limit = data.zero_tolerances[name] if zero_ref else data.tolerances[name]
            if not rel <= limit:
                what = "RMS error (zero reference)" if zero_ref else "relative error"
                raise CandidateFailed("wrong", f"{where}: {what} {rel:.2e} > {limit:.1e}")
            worst = max(worst, rel)
        return worst

    def errors(self, data: DataSet) -> dict[str, tuple[float, bool, str]]:
        """Per output: (relative error, or RMS error where the reference is all zero; whether it is; where).
        Raises CandidateFailed for NaN/inf where the reference is finite."""
        cuda = self.cuda
        errors = {}
        for name, spec in data.outputs.items():
            n = int(np.prod(spec.shape))
            cuda.memset_d8_async(self.sums, 0, 16, self.stream)
            cuda.memset_d8_async(self.bad, 0, 8, self.stream)
            blocks = max(1, min(math.ceil(n / 256), self.sm_count * 8))
            out, _ = data.buffers[name]
            self.compares[spec.dtype].prepared_async_call(
                (blocks, 1), (256, 1, 1), self.stream,
                int(out), int(data.refs[name]), np.uint64(n), int(self.sums), int(self.bad),
            )  # fmt: skip
            sums = np.empty(2, np.float64)
            bad = np.empty(1, np.uint64)
            cuda.memcpy_dtoh_async(sums, self.sums, self.stream)
            cuda.memcpy_dtoh_async(bad, self.bad, self.stream)
            self.stream.synchronize()
            where = f"{name} at {format_shape(data.shape)}" + ("" if data.kind == UNIFORM else f" ({data.kind} inputs)")
            if bad[0]:
                raise CandidateFailed(
                    "nan", f"{where}: {int(bad[0])} of {n} elements NaN/inf (not written, or overflow)"
                )
            if sums[1] > 0:
                errors[name] = (math.sqrt(sums[0] / sums[1]), False, where)
            else:  # the reference is exactly zero: an absolute bound
                errors[name] = (math.sqrt(sums[0] / max(n, 1)), True, where)
        return errors
