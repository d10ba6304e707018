"""The few CUDA driver API calls the runtime dispatcher needs, through ctypes (libcuda ships with the driver).

Why not pycuda here: the dispatcher must launch on the caller's stream (a torch or cupy stream handle), and
pycuda can neither wrap a foreign CUstream nor hand out a CUfunction to launch with; its per-call argument
packing also costs more than our 10 µs budget. Search keeps using pycuda in its worker process; a program that
only *uses* tuned kernels needs nothing but the driver.

Every call checks its CUresult and raises `DeviceError` with the driver's own name and description.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from typing import Any

from autotune.errors import DeviceError

CUresult = ctypes.c_int
CUdeviceptr = ctypes.c_uint64

# Enumerators used below (cuda.h).
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT = 11, 12
CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH = 13
CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14
PORTABLE_CLUSTER_SIZE = 8  # blocks; beyond it (16 on sm_90) a kernel must opt in
CU_POINTER_ATTRIBUTE_CONTEXT = 1
CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2
CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_ARRAY, CU_MEMORYTYPE_UNIFIED = 1, 2, 3, 4
CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1
CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8
CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12
CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81
CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82
CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3
CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6


class CUlaunchAttribute(ctypes.Structure):
    """cuda.h's CUlaunchAttribute: an attribute id, padding to 8 bytes, a 64-byte value union."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int * 16)]


class CUlaunchConfig(ctypes.Structure):
    """cuda.h's CUlaunchConfig, what cuLaunchKernelEx takes."""

    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(CUlaunchAttribute)),
                ("count", ctypes.c_uint)]  # fmt: skip
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_NOT_INITIALIZED = 3


def _signatures() -> dict[str, tuple]:
    """The argument types of the driver functions `Driver` calls (cuda.h); each returns a CUresult."""
    p, i, u, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_size_t
    return {
        "cuInit": (u,),
        "cuDriverGetVersion": (ctypes.POINTER(i),),
        "cuDeviceGetCount": (ctypes.POINTER(i),),
        "cuDeviceGet": (ctypes.POINTER(i), i),
        "cuDeviceGetName": (ctypes.c_char_p, i, i),
        "cuDeviceGetAttribute": (ctypes.POINTER(i), i, i),
        "cuDeviceTotalMem_v2": (ctypes.POINTER(sz), i),
        "cuDevicePrimaryCtxRetain": (ctypes.POINTER(p), i),
        "cuCtxGetCurrent": (ctypes.POINTER(p),),
        "cuCtxSetCurrent": (p,),
        "cuCtxSynchronize": (),
        "cuModuleLoadData": (ctypes.POINTER(p), p),
        "cuModuleGetFunction": (ctypes.POINTER(p), p, ctypes.c_char_p),
        "cuModuleUnload": (p,),
        "cuFuncSetAttribute": (p, i, i),
        "cuFuncGetAttribute": (ctypes.POINTER(i), i, p),
        "cuLaunchKernel": (p, u, u, u, u, u, u, u, p, ctypes.POINTER(p), ctypes.POINTER(p)),
        "cuMemAlloc_v2": (ctypes.POINTER(CUdeviceptr), sz),
        "cuMemFree_v2": (CUdeviceptr,),
        "cuMemcpyHtoDAsync_v2": (CUdeviceptr, p, sz, p),
        "cuMemcpyDtoHAsync_v2": (p, CUdeviceptr, sz, p),
        "cuMemsetD8Async": (CUdeviceptr, ctypes.c_ubyte, sz, p),
        "cuMemGetAddressRange_v2": (ctypes.POINTER(CUdeviceptr), ctypes.POINTER(sz), CUdeviceptr),
        "cuPointerGetAttribute": (p, i, CUdeviceptr),
        "cuStreamSynchronize": (p,),
        "cuGetErrorName": (i, ctypes.POINTER(ctypes.c_char_p)),
        "cuGetErrorString": (i, ctypes.POINTER(ctypes.c_char_p)),
    }


def load_libcuda() -> ctypes.CDLL:
    """libcuda, with the signatures of the functions `Driver` calls declared; `DeviceError` where the machine
    has no NVIDIA driver. ``cuTensorMapEncodeTiled`` (TMA, CUDA 12 drivers and newer) is declared where it
    exists, so that an older driver still launches everything else."""
    lib = None
    for name in ["libcuda.so.1", "libcuda.so", ctypes.util.find_library("cuda")]:
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        raise DeviceError("the CUDA driver (libcuda.so) is not installed: no NVIDIA GPU driver on this machine")
    for name, argtypes in _signatures().items():
        fn = getattr(lib, name)
        fn.argtypes = list(argtypes)
        fn.restype = CUresult
    encode_tiled = getattr(lib, "cuTensorMapEncodeTiled", None)
    if encode_tiled is not None:
        p, i, u = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
        u64p, u32p = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
        encode_tiled.argtypes = [p, i, u, p, u64p, u64p, u32p, u32p, i, i, i, i]
        encode_tiled.restype = CUresult
    launch_ex = getattr(lib, "cuLaunchKernelEx", None)  # CUDA 11.8 drivers and newer
    if launch_ex is not None:
        p = ctypes.c_void_p
        launch_ex.argtypes = [ctypes.POINTER(CUlaunchConfig), p, ctypes.POINTER(p), ctypes.POINTER(p)]
        launch_ex.restype = CUresult
    return lib


class Driver:
    """libcuda (`load_libcuda`), initialised once per process."""

    _instance: "Driver | None" = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.lib = load_libcuda()
        self._launch = self.lib.cuLaunchKernel
        self._encode_tiled = getattr(self.lib, "cuTensorMapEncodeTiled", None)  # None: a driver older than CUDA 12
        self._launch_ex = getattr(self.lib, "cuLaunchKernelEx", None)  # None: older than CUDA 11.8
        self.check(self.lib.cuInit(0), "cuInit")

    @classmethod
    def get(cls) -> "Driver":
        with cls._lock:
            if cls._instance is None:
                cls._instance = Driver()
            return cls._instance

    # --- errors ---------------------------------------------------------------------------------------------
    def describe(self, code: int) -> str:
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        self.lib.cuGetErrorName(code, ctypes.byref(name))
        self.lib.cuGetErrorString(code, ctypes.byref(text))
        n = name.value.decode() if name.value else f"CUDA error {code}"
        return f"{n}: {text.value.decode()}" if text.value else n

    def check(self, code: int, what: str) -> None:
        if code != 0:
            raise DeviceError(f"{what} failed: {self.describe(code)}")

    # --- devices and contexts -------------------------------------------------------------------------------
    def device_count(self) -> int:
        n = ctypes.c_int()
        self.check(self.lib.cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
        return n.value

    def device(self, ordinal: int) -> int:
        dev = ctypes.c_int()
        self.check(self.lib.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")
        return dev.value

    def device_name(self, dev: int) -> str:
        buf = ctypes.create_string_buffer(256)
        self.check(self.lib.cuDeviceGetName(buf, 256, dev), "cuDeviceGetName")
        return buf.value.decode()

    def attribute(self, dev: int, attr: int) -> int:
        v = ctypes.c_int()
        self.check(self.lib.cuDeviceGetAttribute(ctypes.byref(v), attr, dev), "cuDeviceGetAttribute")
        return v.value

    def total_memory(self, dev: int) -> int:
        n = ctypes.c_size_t()
        self.check(self.lib.cuDeviceTotalMem_v2(ctypes.byref(n), dev), "cuDeviceTotalMem")
        return n.value

    def driver_version(self) -> int:
        v = ctypes.c_int()
        self.check(self.lib.cuDriverGetVersion(ctypes.byref(v)), "cuDriverGetVersion")
        return v.value

    def primary_context(self, dev: int) -> int:
        ctx = ctypes.c_void_p()
        self.check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        return ctx.value or 0

    def make_current(self, ctx: int) -> None:
        """Make ``ctx`` current on this thread unless it already is (the cheap common case)."""
        cur = ctypes.c_void_p()
        self.lib.cuCtxGetCurrent(ctypes.byref(cur))
        if (cur.value or 0) != ctx:
            self.check(self.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    # --- modules and launches -------------------------------------------------------------------------------
    def load_module(self, image: bytes) -> int:
        mod = ctypes.c_void_p()
        self.check(self.lib.cuModuleLoadData(ctypes.byref(mod), image), "cuModuleLoadData")
        return mod.value or 0

    def function(self, module: int, name: str) -> int:
        fn = ctypes.c_void_p()
        self.check(self.lib.cuModuleGetFunction(ctypes.byref(fn), module, name.encode()), f"cuModuleGetFunction({name})")
        return fn.value or 0

    def unload_module(self, module: int) -> None:
        self.check(self.lib.cuModuleUnload(module), "cuModuleUnload")

    def encode_tensor_map(self, address: int, pointer: int, data_type: int, rank: int, dims: Any, strides: Any,
                          box: Any, element_strides: Any, swizzle: int) -> None:  # fmt: skip
        """cuTensorMapEncodeTiled into the 128 bytes at ``address``: a dense tensor at device ``pointer``, no
        interleave, out-of-bounds elements read as zeros, L2 promotion of 256 bytes."""
        if self._encode_tiled is None:
            raise DeviceError("this CUDA driver has no cuTensorMapEncodeTiled (TMA needs a CUDA 12 driver or newer)")
        code = self._encode_tiled(address, data_type, rank, pointer, dims, strides, box, element_strides, 0, swizzle,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0)  # fmt: skip
        self.check(code, "cuTensorMapEncodeTiled")

    def set_max_dynamic_shared(self, function: int, nbytes: int) -> None:
        code = self.lib.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)
        self.check(code, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")

    def allow_dynamic_shared(self, function: int, nbytes: int) -> None:
        """Let ``function`` launch with ``nbytes`` of dynamic shared memory. Without the attribute a kernel may
        take 48 KiB less its *static* shared memory, so 48 KiB dynamic beside 1 KiB static already fails to launch
        (CUDA_ERROR_INVALID_VALUE): the attribute is set for any dynamic size."""
        if nbytes > 0:
            self.set_max_dynamic_shared(function, nbytes)

    def compiled_cluster_blocks(self, function: int) -> int:
        """Blocks per cluster that ``function`` was compiled for (``__cluster_dims__``); 1 for none, and where the
        driver does not know the attributes (CUDA_ERROR_INVALID_VALUE: older than CUDA 11.8, no clusters there
        either); any other failure raises `DeviceError`."""
        blocks = 1
        for attribute in (CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
                          CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH):  # fmt: skip
            value = ctypes.c_int()
            code = self.lib.cuFuncGetAttribute(ctypes.byref(value), attribute, function)
            if code == CUDA_ERROR_INVALID_VALUE:
                return 1
            self.check(code, "cuFuncGetAttribute(REQUIRED_CLUSTER_*)")
            blocks *= max(value.value, 1)
        return blocks

    def prepare(self, function: int, shared_bytes: int) -> None:
        """Ready a loaded kernel to launch as its plan says: ``shared_bytes`` of dynamic shared memory
        (`allow_dynamic_shared`), and a cluster larger than the portable 8 blocks where it was compiled with one
        (``__cluster_dims__``): without the opt-in such a launch fails (CUDA_ERROR_CLUSTER_OUT_OF_RESOURCES)."""
        self.allow_dynamic_shared(function, shared_bytes)
        if self.compiled_cluster_blocks(function) > PORTABLE_CLUSTER_SIZE:
            code = self.lib.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
            self.check(code, "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)")

    def launch(self, function: int, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int,
               stream: int, params: Any) -> None:  # fmt: skip
        code = self._launch(function, *grid, *block, shared, stream, params, None)
        if code:
            self.check(code, "cuLaunchKernel")

    def launcher(self, function: int, grid: tuple[int, int, int], block: tuple[int, int, int],
                 shared: int, overlaps_previous: bool = False) -> Any:  # fmt: skip
        """cuLaunchKernel with everything but (stream, params, extra) converted once: the per-call path. With
        ``overlaps_previous``, cuLaunchKernelEx as a programmatic dependent launch (`Launch`), where the driver
        has it; a plain launch otherwise, which the kernel's griddepcontrol.wait does not need."""
        if overlaps_previous and self._launch_ex is not None:
            return self._dependent_launcher(function, grid, block, shared)
        fixed = (ctypes.c_void_p(function), *(ctypes.c_uint(v) for v in (*grid, *block, shared)))
        launch = self._launch

        def call(stream: int, params: Any) -> int:
            return launch(*fixed, stream, params, None)

        return call

    def _dependent_launcher(self, function: int, grid: tuple[int, int, int], block: tuple[int, int, int],
                            shared: int) -> Any:  # fmt: skip
        attribute = CUlaunchAttribute(id=CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
        attribute.value[0] = 1  # programmaticStreamSerializationAllowed
        config = CUlaunchConfig(grid=(ctypes.c_uint * 3)(*grid), block=(ctypes.c_uint * 3)(*block), shared=shared,
                                attrs=ctypes.pointer(attribute), count=1)  # fmt: skip
        handle, launch_ex, by_ref = ctypes.c_void_p(function), self._launch_ex, ctypes.byref(config)

        def call(stream: int, params: Any) -> int:
            config.stream = stream  # the launch plan's lock serialises its calls
            return launch_ex(by_ref, handle, params, None)

        call.keep = (attribute, config)  # type: ignore[attr-defined]  (what the config points at lives as long)
        return call

    # --- memory ---------------------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        ptr = CUdeviceptr()
        self.check(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), max(nbytes, 1)), f"cuMemAlloc({nbytes} bytes)")
        return ptr.value

    def free(self, ptr: int) -> None:
        self.lib.cuMemFree_v2(ptr)

    def copy_to_device(self, dst: int, src_host: int, nbytes: int, stream: int) -> None:
        self.check(self.lib.cuMemcpyHtoDAsync_v2(dst, src_host, nbytes, stream), "cuMemcpyHtoD")

    def copy_to_host(self, dst_host: int, src: int, nbytes: int, stream: int) -> None:
        self.check(self.lib.cuMemcpyDtoHAsync_v2(dst_host, src, nbytes, stream), "cuMemcpyDtoH")

    def zero(self, ptr: int, nbytes: int, stream: int) -> None:
        self.check(self.lib.cuMemsetD8Async(ptr, 0, nbytes, stream), "cuMemsetD8")

    def synchronize(self, stream: int) -> None:
        self.check(self.lib.cuStreamSynchronize(stream), "cuStreamSynchronize")

    def pointer_info(self, ptr: int) -> tuple[int, int, int] | None:
        """(memory type, device ordinal, allocation bytes from ptr to its end) of a pointer CUDA knows; None
        for memory CUDA does not know (a plain host pointer)."""
        mtype, ordinal = ctypes.c_uint(), ctypes.c_int()
        code = self.lib.cuPointerGetAttribute(ctypes.byref(mtype), CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr)
        if code == CUDA_ERROR_INVALID_VALUE:
            return None
        self.check(code, "cuPointerGetAttribute")
        self.check(
            self.lib.cuPointerGetAttribute(ctypes.byref(ordinal), CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr),
            "cuPointerGetAttribute",
        )
        base, size = CUdeviceptr(), ctypes.c_size_t()
        code = self.lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ptr)
        remaining = (base.value + size.value - ptr) if code == 0 else -1
        return mtype.value, ordinal.value, remaining
