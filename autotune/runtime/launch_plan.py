"""A configuration's launches, bound once and run many times: the one launch path of the search's GPU worker,
the runtime dispatcher (`autotune.runtime.dispatch`) and the torch operators (`autotune.torch`), so that what the search
timed is what later runs.

A space describes its launches (`autotune.spaces.base.Launch` / `Zero`) with arguments that are buffer names,
numpy scalars or tensor maps (`TensorMap`). `LaunchPlan` turns them, once, into parameter blocks for
cuLaunchKernel over the driver API (`autotune.runtime.cuda_driver`): scalars are packed at build time; per call only the
buffers' device pointers are written into their slots (and a tensor map over a buffer whose pointer changed is
encoded again), then the launches are issued on the caller's stream.

    plan = LaunchPlan(driver, steps, function_of, names=("A", "B", "C"), sizes={"C": nbytes})
    plan.launch([a_ptr, b_ptr, c_ptr], stream)

Nothing here allocates, synchronises or checks shapes: callers (the worker, `TunedKernel`) have done that.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from autotune import dtypes
from autotune.errors import InvalidArgument
from autotune.runtime.cuda_driver import Driver
from autotune.spaces.base import Launch, Step, TensorMap, Zero

_CTYPE = {np.dtype(np.int32): ctypes.c_int32, np.dtype(np.int64): ctypes.c_int64,
          np.dtype(np.uint32): ctypes.c_uint32, np.dtype(np.uint64): ctypes.c_uint64,
          np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}  # fmt: skip

# CUtensorMapDataType (cuda.h) by the element's dtype name.
_TMA_DTYPE = {"float16": 6, "float32": 7, "bfloat16": 9}
_TMA_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}  # CUtensorMapSwizzle by bytes
TMA_ALIGNMENT = 16  # bytes: a tensor map's base address and every stride


class _TensorMapSlot:
    """A tensor map kernel argument over one buffer: 128 bytes (64-byte aligned), encoded again only when the
    buffer's pointer changes."""

    def __init__(self, driver: Driver, spec: TensorMap, index: int) -> None:
        itemsize = dtypes.dtype(spec.dtype).itemsize
        problems = spec.problems()
        if problems:
            raise InvalidArgument(f"tensor map over {spec.buffer}: {'; '.join(problems)}")
        self.spec = spec
        self.index = index
        self.driver = driver
        self._raw = ctypes.create_string_buffer(128 + 64)
        self.address = (ctypes.addressof(self._raw) + 63) & ~63
        rank = len(spec.dims)
        strides, total = [], itemsize
        for extent in spec.dims[:-1]:
            total *= extent
            strides.append(total)
        self._args = (
            _TMA_DTYPE[spec.dtype],
            rank,
            (ctypes.c_uint64 * rank)(*spec.dims),
            (ctypes.c_uint64 * max(rank - 1, 1))(*strides),
            (ctypes.c_uint32 * rank)(*spec.box),
            (ctypes.c_uint32 * rank)(*([1] * rank)),
            _TMA_SWIZZLE[spec.swizzle],
        )
        self.pointer = -1

    def describe(self) -> tuple:
        data_type, rank, dims, strides, box, _element_strides, swizzle = self._args
        return ("tmap", self.index, data_type, tuple(dims), tuple(strides[: rank - 1]), tuple(box), swizzle)

    def bind(self, pointer: int) -> None:
        if pointer == self.pointer:
            return
        if pointer % TMA_ALIGNMENT:
            raise InvalidArgument(f"{self.spec.buffer} at {pointer:#x} is not {TMA_ALIGNMENT}-byte aligned, which "
                                  "this configuration's TMA copies need: pass an aligned array (a fresh allocation "
                                  "is)")  # fmt: skip
        self.driver.encode_tensor_map(self.address, pointer, *self._args)
        self.pointer = pointer


class LaunchPlan:
    """The launches of one configuration at one shape, ready to run.

    ``names``: the buffers in the order `launch` receives their pointers; ``sizes``: bytes of each buffer a
    `Zero` step clears; ``function_of(kernel, shared_bytes)``: the loaded CUfunction of a kernel (with its
    dynamic shared-memory limit raised as needed). Calls may come from several threads: the parameter blocks
    are shared, so filling and launching is done under a lock."""

    def __init__(self, driver: Driver, steps: Sequence[Step], function_of: Callable[[str, int], int],
                 names: Sequence[str], sizes: Mapping[str, int]) -> None:  # fmt: skip
        self.names = tuple(names)
        index = {name: i for i, name in enumerate(self.names)}
        self._driver = driver
        self._lock = threading.Lock()
        self._slots: list[tuple[ctypes.c_uint64, int]] = []  # pointer holder, position in `names`
        self._maps: list[_TensorMapSlot] = []
        self._keep: list[Any] = []  # holders the parameter blocks point at
        self._runs: list[Callable[[Sequence[int], int], None]] = []
        self._described: list[tuple] = []  # see `describe`
        for step in steps:
            if isinstance(step, Zero):
                self._runs.append(self._zero(index[step.buffer], sizes[step.buffer]))
                self._described.append(("zero", index[step.buffer], sizes[step.buffer]))
                continue
            assert isinstance(step, Launch)
            function = function_of(step.kernel, step.shared_bytes)
            addresses, described = [], []
            for arg in step.args:
                if isinstance(arg, str):
                    holder = ctypes.c_uint64(0)
                    self._slots.append((holder, index[arg]))
                    self._keep.append(holder)
                    addresses.append(ctypes.addressof(holder))
                    described.append(("ptr", index[arg]))
                elif isinstance(arg, TensorMap):
                    slot = _TensorMapSlot(driver, arg, index[arg.buffer])
                    self._maps.append(slot)
                    addresses.append(slot.address)
                    described.append(slot.describe())
                else:
                    holder = _CTYPE[np.asarray(arg).dtype](arg.item() if hasattr(arg, "item") else arg)
                    self._keep.append(holder)
                    addresses.append(ctypes.addressof(holder))
                    described.append(("value", bytes(holder)))
            params = (ctypes.c_void_p * max(len(addresses), 1))(*addresses)
            self._keep.append(params)
            self._runs.append(self._launch(function, step, params))
            self._described.append(("launch", step.kernel, function, step.grid, step.block, step.shared_bytes,
                                    described, step.overlaps_previous))  # fmt: skip

    def describe(self) -> list[tuple]:
        """The bound launches as plain data, for another executor of the same plan (the torch operators' C++
        launcher, `autotune.torch.native`): per step ``("zero", buffer, nbytes)`` or ``("launch", kernel,
        CUfunction, grid, block, shared_bytes, args, overlaps_previous)``, each argument ``("ptr", buffer)``,
        ``("value", bytes)`` or ``("tmap", buffer, CUtensorMapDataType, dims, byte strides, box,
        CUtensorMapSwizzle)``; a buffer is its position in ``names``."""
        return list(self._described)

    def _zero(self, position: int, nbytes: int) -> Callable[[Sequence[int], int], None]:
        zero = self._driver.zero
        return lambda pointers, stream: zero(pointers[position], nbytes, stream)

    def _launch(self, function: int, step: Launch, params: Any) -> Callable[[Sequence[int], int], None]:
        call = self._driver.launcher(function, step.grid, step.block, step.shared_bytes, step.overlaps_previous)
        entry = "cuLaunchKernelEx" if step.overlaps_previous else "cuLaunchKernel"
        check, what = self._driver.check, f"{entry}({step.kernel})"

        def run(pointers: Sequence[int], stream: int) -> None:
            code = call(stream, params)
            if code:
                check(code, what)

        return run

    def launch(self, pointers: Sequence[int], stream: int) -> None:
        """Run every step on ``pointers`` (one per name of ``names``, in that order) on ``stream``."""
        with self._lock:
            for holder, position in self._slots:
                holder.value = pointers[position]
            for tensor_map in self._maps:
                tensor_map.bind(pointers[tensor_map.index])
            for run in self._runs:
                run(pointers, stream)
