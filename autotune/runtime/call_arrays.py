"""A call's arrays at run time: on the kernel's GPU, the outputs checked or allocated, the stream to run on, and
numpy arrays copied through the device."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from autotune.errors import InvalidArgument, InvalidType
from autotune.runtime.arrays import CAI, CUPY, RAW, TORCH, ArrayArg, check_matches, describe, empty_like
from autotune.runtime.cuda_driver import CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_UNIFIED, Driver
from autotune.runtime.problem_plan import ProblemPlan
from autotune.runtime.torch_calls import torch_current_stream


class CallArrays:
    """The per-call array handling of one `TunedKernel` on one GPU (see the module)."""

    def __init__(self, driver: Driver, context: int, ordinal: int) -> None:
        self._driver = driver
        self._context = context
        self._ordinal = ordinal

    def check_device(self, arg: ArrayArg) -> None:
        """The array is on this kernel's GPU (a raw pointer: the driver says where it points, and how far)."""
        if arg.device is not None:
            if arg.device != self._ordinal:
                raise InvalidArgument(f"{arg.name} is on GPU {arg.device}; this kernel runs on GPU {self._ordinal}")
            return
        if arg.kind in (CAI, RAW):  # no framework to trust: ask the driver what the pointer is
            info = self._driver.pointer_info(arg.ptr)
            if info is None or info[0] not in (CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_UNIFIED):
                raise InvalidType(f"{arg.name} does not point to GPU memory")
            if info[1] != self._ordinal:
                raise InvalidArgument(f"{arg.name} is on GPU {info[1]}; this kernel runs on GPU {self._ordinal}")
            arg.nbytes_available = info[2] if info[2] >= 0 else None

    def outputs(self, plan: ProblemPlan, inputs: Sequence[ArrayArg], out: Any) -> list[ArrayArg]:
        """The output arrays: ``out`` checked (on the GPU, writable, of the right shape and dtype), or new ones of
        the inputs' framework."""
        names = list(plan.outputs)
        if out is None:
            made = []
            for name in names:
                spec = plan.outputs[name]
                obj = empty_like(inputs[0], spec.shape, spec.dtype)
                if obj is None:
                    raise InvalidArgument(f"pass out=: cannot allocate {name} like {type(inputs[0].obj).__name__}")
                made.append(describe(name, obj))
            return made
        given = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(given) != len(names):
            raise InvalidArgument(f"out= needs {len(names)} arrays ({', '.join(names)}), got {len(given)}")
        args = []
        for name, obj in zip(names, given):
            arg = describe(f"out ({name})" if len(names) > 1 else "out", obj)
            if arg.on_host:
                raise InvalidType(f"{arg.name} is a numpy array but the inputs are on the GPU")
            if arg.readonly:
                raise InvalidArgument(f"{arg.name} is read-only")
            self.check_device(arg)
            check_matches(arg, plan.outputs[name].shape, plan.outputs[name].dtype)
            arg.name = name
            args.append(arg)
        return args

    def current_stream(self, inputs: Sequence[ArrayArg]) -> int:
        """The stream the caller's framework is working on (their 'current stream'); else the default one."""
        kinds = {a.kind for a in inputs}
        if TORCH in kinds:
            return torch_current_stream(self._ordinal)
        if CUPY in kinds:
            import cupy

            return cupy.cuda.get_current_stream().ptr
        for arg in inputs:
            if arg.stream is not None:
                return arg.stream
        return 0

    def call_host(self, plan: ProblemPlan, inputs: Sequence[ArrayArg], out: Any) -> Any:
        """A call on numpy arrays: copied to the device, run on the default stream, the outputs copied back."""
        names = list(plan.outputs)
        if out is None:
            results = [np.empty(plan.outputs[n].shape, plan.outputs[n].dtype) for n in names]
        else:
            results = list(out) if isinstance(out, (tuple, list)) else [out]
            if len(results) != len(names):
                raise InvalidArgument(f"out= needs {len(names)} arrays ({', '.join(names)}), got {len(results)}")
            for name, obj in zip(names, results):
                arg = describe("out", obj)
                if not arg.on_host:
                    raise InvalidType("out is a GPU array but the inputs are numpy arrays")
                if not obj.flags.writeable:
                    raise InvalidArgument("out is read-only")
                check_matches(arg, plan.outputs[name].shape, plan.outputs[name].dtype)
        driver = self._driver
        driver.make_current(self._context)
        allocated: dict[str, int] = {}
        try:
            for arg in inputs:
                allocated[arg.name] = driver.alloc(arg.obj.nbytes)
                driver.copy_to_device(allocated[arg.name], arg.ptr, arg.obj.nbytes, 0)
            for name in names:
                allocated[name] = driver.alloc(plan.outputs[name].nbytes)
            plan.run(driver, allocated, 0)
            for name, array in zip(names, results):
                driver.copy_to_host(array.ctypes.data, allocated[name], array.nbytes, 0)
            driver.synchronize(0)
        finally:
            for ptr in allocated.values():
                driver.free(ptr)
        return results[0] if len(results) == 1 else tuple(results)
