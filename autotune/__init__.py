"""autotune: find the fastest configuration of CUDA kernels by search, and use it at run time.

    autotune search gemm --trials 200          # the command line
    autotune.tune("gemm", "4096x4096x4096")    # the same from Python
    gemm = autotune.load("gemm"); C = gemm(A, B)   # the tuned kernel, at run time

GPU work needs pycuda (``pip install 'autotune[cuda]'``); it is imported only where a GPU is used.
"""

from autotune.errors import (
    AutotuneError,
    DeviceError,
    InvalidArgument,
    InvalidConfig,
    InvalidType,
    NotTuned,
    StorageError,
    ToolchainError,
    UnknownKernel,
)
from autotune.runtime.call_log import load_shapes, record
from autotune.runtime.dispatch import TunedKernel, load
from autotune.spaces import KernelSpace, get_space, kernel_names
from autotune.tuning.search_report import SearchReport, SearchSettings
from autotune.tuning.tune import tune

__version__ = "0.1.0"

__all__ = [
    "AutotuneError",
    "DeviceError",
    "InvalidArgument",
    "InvalidConfig",
    "InvalidType",
    "KernelSpace",
    "NotTuned",
    "SearchReport",
    "SearchSettings",
    "StorageError",
    "ToolchainError",
    "UnknownKernel",
    "TunedKernel",
    "get_space",
    "kernel_names",
    "load",
    "load_shapes",
    "record",
    "tune",
]
