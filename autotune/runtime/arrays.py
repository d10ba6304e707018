"""The caller's arrays as the dispatcher sees them: pointer, shape, dtype, where they live, how to make more.

Accepted: numpy arrays (host: copied to and from the GPU), torch and cupy arrays, pycuda GPUArrays, anything with
``__cuda_array_interface__`` (used in place, no copies), and — as ``out=`` only — a raw pycuda
``DeviceAllocation`` of sufficient size. The common frameworks are read through their own cheap attributes
(a torch tensor's ``__cuda_array_interface__`` alone costs microseconds); others through the interface.

Every problem is an `InvalidArgument` / `InvalidType` that names the argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune import dtypes
from autotune.errors import InvalidArgument, InvalidType

HOST, TORCH, CUPY, PYCUDA, CAI, RAW = "numpy", "torch", "cupy", "pycuda", "cuda_array_interface", "raw"


@dataclass(slots=True)
class ArrayArg:
    name: str
    kind: str
    ptr: int
    shape: tuple[int, ...] | None  # None: a raw allocation (out= only)
    dtype: str | None  # a name of autotune.dtypes where known (float32, bfloat16, …), else numpy's name
    device: int | None  # GPU ordinal, None for host arrays or where unknown
    obj: Any
    nbytes_available: int | None = None  # for raw allocations
    readonly: bool = False
    stream: int | None = None  # the producer's stream, where the array says (__cuda_array_interface__ v3)

    @property
    def on_host(self) -> bool:
        return self.kind == HOST


_MODULE_OF_TYPE: dict[type, str] = {}  # the call path runs per kernel call: keep it to dict lookups
_DTYPE_NAME: dict[Any, str] = {}  # framework dtype object → its name (torch.bfloat16 → "bfloat16")


def _module(obj: Any) -> str:
    kind = type(obj)
    module = _MODULE_OF_TYPE.get(kind)
    if module is None:
        module = _MODULE_OF_TYPE[kind] = kind.__module__.split(".", 1)[0]
    return module


def dtype_name(framework_dtype: Any) -> str:
    """The name of a numpy, torch or cupy dtype as autotune writes it (``float32``, ``bfloat16``, …)."""
    name = _DTYPE_NAME.get(framework_dtype)
    if name is None:
        text = framework_dtype.name if isinstance(framework_dtype, np.dtype) else str(framework_dtype)
        name = _DTYPE_NAME[framework_dtype] = text.removeprefix("torch.")
    return name


def _check_contiguous(name: str, ok: bool, obj_shape: Any, strides: Any = None) -> None:
    if not ok:
        raise InvalidArgument(f"{name} is not C-contiguous (shape {tuple(obj_shape)}, strides {strides}): "
                              f"pass a contiguous array (e.g. .contiguous() / np.ascontiguousarray)")  # fmt: skip


def describe(name: str, obj: Any) -> ArrayArg:
    """Normalise one array argument."""
    module = _module(obj)
    if module == "torch" and hasattr(obj, "data_ptr"):  # first: the hottest path
        if not obj.is_cuda:
            raise InvalidType(f"{name} is a torch tensor on {obj.device}: pass CUDA tensors, or numpy arrays")
        if not obj.is_contiguous():
            _check_contiguous(name, False, obj.shape, obj.stride())
        return ArrayArg(name, TORCH, obj.data_ptr(), tuple(obj.shape), dtype_name(obj.dtype), obj.get_device(), obj)
    if isinstance(obj, np.ndarray):
        _check_contiguous(name, obj.flags.c_contiguous, obj.shape, obj.strides)
        return ArrayArg(name, HOST, obj.ctypes.data, tuple(obj.shape), dtype_name(obj.dtype), None, obj)
    if module == "cupy" and hasattr(obj, "data") and hasattr(obj, "flags"):
        _check_contiguous(name, obj.flags.c_contiguous, obj.shape, obj.strides)
        return ArrayArg(name, CUPY, obj.data.ptr, tuple(obj.shape), dtype_name(obj.dtype), obj.device.id, obj)
    if module == "pycuda":
        if hasattr(obj, "gpudata"):  # GPUArray
            _check_contiguous(name, obj.flags.c_contiguous, obj.shape, obj.strides)
            return ArrayArg(name, PYCUDA, int(obj.gpudata), tuple(obj.shape), dtype_name(obj.dtype), None, obj)
        if type(obj).__name__ in ("DeviceAllocation", "PooledDeviceAllocation"):
            return ArrayArg(name, RAW, int(obj), None, None, None, obj)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if isinstance(cai, dict):
        try:
            ptr, readonly = cai["data"]
            shape = tuple(int(d) for d in cai["shape"])
            dtype = np.dtype(cai["typestr"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidType(f"{name}: malformed __cuda_array_interface__ ({exc})") from None
        strides = cai.get("strides")
        if strides is not None:
            expected = tuple(int(np.prod(shape[i + 1 :], dtype=np.int64)) * dtype.itemsize for i in range(len(shape)))
            _check_contiguous(name, tuple(strides) == expected, shape, strides)
        stream = cai.get("stream")
        return ArrayArg(name, CAI, int(ptr), shape, dtype_name(dtype), None, obj, readonly=bool(readonly),
                        stream=None if stream in (None, 1) else int(stream))  # 1: the legacy default stream
    if hasattr(obj, "__array_interface__") or hasattr(obj, "__array__"):
        raise InvalidType(f"{name} is a {type(obj).__name__}: pass a numpy array or a GPU array")
    raise InvalidType(f"{name} is a {type(obj).__name__}, not an array")


def check_matches(arg: ArrayArg, shape: tuple[int, ...], dtype: str) -> None:
    """The array has exactly the expected shape and dtype (raw allocations: enough bytes)."""
    want = dtypes.dtype(dtype).name
    if arg.shape is None:
        needed = dtypes.nbytes(shape, want)
        if arg.nbytes_available is not None and arg.nbytes_available < needed:
            raise InvalidArgument(f"{arg.name} holds {arg.nbytes_available} bytes, {needed} are needed")
        return
    if arg.dtype != want:
        raise InvalidType(f"{arg.name} has dtype {arg.dtype}, expected {want}")
    if tuple(arg.shape) != tuple(shape):
        raise InvalidArgument(f"{arg.name} has shape {tuple(arg.shape)}, expected {tuple(shape)}")


def empty_like(template: ArrayArg, shape: tuple[int, ...], dtype: str) -> Any:
    """A new device array of the same framework as ``template`` (None: the framework cannot be asked)."""
    obj = template.obj
    if template.kind == TORCH:
        import torch

        return torch.empty(shape, dtype=getattr(torch, dtype), device=obj.device)
    if dtype == "bfloat16":
        return None  # numpy, cupy and pycuda have no bfloat16
    if template.kind == CUPY:
        import cupy

        with cupy.cuda.Device(template.device):
            return cupy.empty(shape, dtype=dtype)
    if template.kind == PYCUDA:
        from pycuda import gpuarray

        return gpuarray.empty(shape, dtype=dtype)
    return None


def stream_handle(stream: Any) -> int:
    """A CUstream handle from an int, a torch or cupy stream, or any object with ``__cuda_stream__``."""
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    for attr in ("cuda_stream", "ptr", "handle"):  # torch.cuda.Stream, cupy Stream, others
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value
    raise InvalidType(f"stream is a {type(stream).__name__}: pass a CUstream handle (int), a torch or cupy stream")
