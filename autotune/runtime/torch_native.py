"""The C++ launcher of torch calls (autotune/runtime/torch_launcher.cpp): built once per machine, then loaded.

A ``torch.ops.autotune.*`` call whose kernel is implemented in Python pays torch's dispatcher → Python crossing
twice (the Autograd kernel, then the CUDA one) and Python's own work per call: about 20 µs of host time where
torch's own ops take a few. So the CUDA and Autograd kernels of every operator are C++ (`register_cuda`,
`register_autograd`); Python is entered only for the first call of a new key (sizes, dtypes, device), to check
the tensors and describe the plan, and for calls that need a gradient. A `TunedKernel` called on torch tensors
(`autotune.runtime.torch_calls`) runs its plans here too: one call into C++ per kernel call.

The extension is compiled with torch's `torch.utils.cpp_extension.load` (a C++ compiler, ninja and the CUDA
headers, as any torch extension needs) into the compile cache (``$AUTOTUNE_CACHE_DIR``/native), named by the
hash of its source and torch's version, so that an edit or a new torch builds again and nothing else does.
Where it cannot be built (no compiler, no CUDA toolkit: a deployment machine) or ``AUTOTUNE_NATIVE=0``, the
operators keep their Python kernels: the same plans and launches, at the old cost; the reason is logged once.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

from autotune.runtime import call_log
from autotune.runtime.compiler import cache_root
from autotune.runtime.cuda_driver import CU_TENSOR_MAP_L2_PROMOTION_L2_256B, Driver
from autotune.runtime.problem_plan import ProblemPlan

log = logging.getLogger("autotune.torch")
SOURCE = Path(__file__).parent / "torch_launcher.cpp"
HEADERS = (Path(__file__).parent / "torch_autograd.h",)  # included by SOURCE: part of the build's identity
_STATE: dict[str, Any] = {}  # "module" once loaded, or "reason" why not
_LOCK = threading.Lock()


def module() -> Any | None:
    """The loaded extension, building it on first use; None where it is off or cannot be built."""
    with _LOCK:
        if "module" in _STATE or "reason" in _STATE:
            return _STATE.get("module")
        try:
            _STATE["module"] = _load()
        except _Off as exc:
            _STATE["reason"] = str(exc)
            log.info("autotune.torch: the C++ launcher is off (%s): Python launches torch calls", exc)
        except Exception as exc:  # a compiler error is any exception type: keep the Python path, say why
            lines = str(exc).strip().splitlines()
            _STATE["reason"] = f"{type(exc).__name__}: {lines[-1] if lines else ''}"
            log.warning("autotune.torch: the C++ launcher could not be built (%s): Python launches torch calls, "
                        "at several µs more per call", _STATE["reason"])  # fmt: skip
        return _STATE.get("module")


class _Off(Exception):
    """The launcher is off by choice or has nothing to run on (not an error)."""


def unavailable_reason() -> str | None:
    """Why the C++ launcher is not in use (None once it is)."""
    return None if module() is not None else _STATE.get("reason")


def _load() -> Any:
    if os.environ.get("AUTOTUNE_NATIVE", "1") == "0":
        raise _Off("AUTOTUNE_NATIVE=0")
    import torch

    if not torch.cuda.is_available():
        raise _Off("torch sees no CUDA device")
    from torch.utils import cpp_extension

    code = SOURCE.read_bytes() + b"".join(h.read_bytes() for h in HEADERS)
    digest = hashlib.sha256(code + torch.__version__.encode()).hexdigest()[:12]
    name = f"autotune_launcher_{digest}"
    build = cache_root() / "native" / name
    build.mkdir(parents=True, exist_ok=True)
    log.info("autotune.torch: loading the C++ launcher %s (built once per machine, ~1 min)", name)
    extension = cpp_extension.load(name=name, sources=[str(SOURCE)], build_directory=str(build),
                                   extra_cflags=["-O2"], with_cuda=True, verbose=False)  # fmt: skip
    lib = Driver.get().lib

    def address(symbol: str) -> int:
        function = getattr(lib, symbol, None)
        return ctypes.cast(function, ctypes.c_void_p).value or 0 if function is not None else 0

    if not address("cuTensorMapEncodeTiled"):
        log.info("autotune.torch: this driver has no cuTensorMapEncodeTiled: TMA configurations will fail to launch")
    extension.init(address("cuLaunchKernel"), address("cuLaunchKernelEx"), address("cuTensorMapEncodeTiled"),
                   address("cuMemsetD8Async"), address("cuGetErrorName"), CU_TENSOR_MAP_L2_PROMOTION_L2_256B)  # fmt: skip
    call_log.on_recording(extension.set_recording)
    return extension


def describe(plan: ProblemPlan, shapes: Sequence[tuple[int, ...]] | None = None) -> tuple:
    """What the C++ launcher needs of a plan: its outputs (sizes, and an empty tensor of the dtype), workspace
    bytes, the launch plan's steps (`LaunchPlan.describe`) and what `autotune.record` notes per call. ``shapes``:
    the outputs' sizes where they are not the plan's own (activations with leading dims)."""
    import torch

    specs = plan.outputs.values()
    sizes = shapes if shapes is not None else [spec.shape for spec in specs]
    outputs = [(tuple(size), torch.empty(0, dtype=getattr(torch, spec.dtype))) for size, spec in zip(sizes, specs)]
    workspace = [max(spec.nbytes, 1) for spec in plan.workspace.values()]
    note = functools.partial(call_log.note, plan.kernel, plan.shape, plan.dtype) if plan.kernel else None
    return outputs, workspace, plan.launches.describe(), note


def register_cuda(name: str, inputs: int, plan_of: Callable[..., tuple[ProblemPlan, list]]) -> bool:
    """The CUDA kernel of ``torch.ops.autotune.<name>`` in C++; ``plan_of(*tensors)`` checks a new key's tensors
    (raising) and returns its plan and the outputs' shapes. False where the launcher is unavailable (the caller
    registers Python's)."""
    extension = module()
    if extension is None:
        return False
    extension.register_cuda(name, inputs, lambda *tensors: describe(*plan_of(*tensors)))
    return True


# Operators whose backward formula the launcher has in C++ (torch_autograd.h's `Formula`, the same formulas as
# autotune/torch/autograd.py): their training calls record a C++ autograd node, with no Python per call.
NATIVE_FORMULAS = {"linear": 1, "layernorm": 2, "gemm": 3, "gemm_nt": 4, "gemm_tn": 5, "linear_gelu": 6,
                   "attention": 7, "attention_causal": 8}


def register_autograd(name: str, inputs: int, with_grad: Callable[..., Any]) -> bool:
    """The Autograd kernel in C++: below autograd at once without a gradient; with one, a C++ autograd node where
    the launcher has the operator's formula (`NATIVE_FORMULAS`), else ``with_grad(keyset, *args)``."""
    extension = module()
    if extension is None:
        return False
    extension.register_autograd(name, inputs, with_grad, NATIVE_FORMULAS.get(name, 0))
    return True


def forget(name: str) -> None:
    """Drop the plans of ``name`` (tests that switch databases)."""
    extension = _STATE.get("module")
    if extension is not None:
        extension.forget(name)
