"""Compiled kernels where nvcc is absent: a store of cubins keyed by what their machine code depends on, NVRTC,
and the one function the runtime asks for a cubin.

`load_cubin(template, defines, arch)` answers, in this order:

1. ``cached``: a cubin in the binary store (put there by ``autotune import`` of a file exported
   ``--with-binaries``, or by an earlier NVRTC compile);
2. ``nvcc``: the compiler of `autotune.runtime.compiler` (its own disk cache first) where nvcc is installed;
3. ``nvrtc``: NVRTC through cuda-python (``pip install 'autotune[nvrtc]'``: cuda-bindings, the NVRTC library
   and the CUDA runtime wheel for its cuda_fp16.h / cuda_bf16.h headers), stored for next time.

The store's key is (template hash, compile defines, architecture): no compiler version, so a cubin built
elsewhere is found. Every cubin is checked before it is stored and before it is loaded: a CUDA ELF whose SM
version is the architecture's. A cubin for another compute capability is never loaded; even where the driver
could run it, it is not the code that was tuned.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
import tempfile
from pathlib import Path
from typing import Mapping

from autotune.errors import InvalidArgument, ToolchainError
from autotune.runtime.compiler import cache_root
from autotune.templates import template_hash, template_path

CACHED, NVCC, NVRTC = "cached", "nvcc", "nvrtc"
ROUTES = (CACHED, NVCC, NVRTC)
ROUTE_ENV = "AUTOTUNE_CUBIN_ROUTE"  # forces one route for the runtime (deployment checks, benchmarks/first_call.py)
_EM_CUDA = 190


def arch_sm(arch: str) -> int:
    """``sm_90a`` → 90."""
    match = re.fullmatch(r"sm_(\d+)[a-z]?", arch)
    if not match:
        raise InvalidArgument(f"architecture {arch!r}: expected e.g. sm_90a")
    return int(match.group(1))


def cubin_sm(data: bytes) -> int:
    """The SM version a cubin was built for (its ELF header); `InvalidArgument` if it is no CUDA ELF."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2:
        raise InvalidArgument("not a cubin: no 64-bit ELF header")
    if struct.unpack_from("<H", data, 18)[0] != _EM_CUDA:
        raise InvalidArgument("not a cubin: the ELF is not for CUDA")
    flags = struct.unpack_from("<I", data, 48)[0]
    # ELF ABI version 8 (CUDA 12.8 on) keeps the SM in bits 8-15; older cubins in bits 0-7.
    return (flags >> 8) & 0xFF if data[8] >= 8 else flags & 0xFF


def binary_key(template_digest: str, defines: Mapping[str, object], arch: str) -> str:
    text = json.dumps({"template": template_digest, "defines": {k: str(v) for k, v in sorted(defines.items())},
                       "arch": arch}, sort_keys=True)  # fmt: skip
    return hashlib.sha256(text.encode()).hexdigest()


class BinaryStore:
    """Cubins on disk under the compile cache (``$AUTOTUNE_CACHE_DIR``/binaries)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or cache_root()) / "binaries"

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.cubin"

    def get(self, key: str, arch: str) -> bytes | None:
        path = self._path(key)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        try:
            if cubin_sm(data) != arch_sm(arch):
                return None  # never load another architecture's code
        except InvalidArgument:
            return None
        return data

    def put(self, key: str, data: bytes, arch: str) -> Path:
        sm = cubin_sm(data)
        if sm != arch_sm(arch):
            raise InvalidArgument(f"cubin is for sm_{sm}, not {arch}")
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as tmp:
            tmp.write(data)
        os.replace(tmp.name, path)
        return path


# NVRTC has no C library headers; the templates need only the fixed-width integer types (LP64, as glibc's).
_STDINT = b"""#pragma once
typedef signed char int8_t; typedef short int16_t; typedef int int32_t; typedef long int64_t;
typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef unsigned int uint32_t;
typedef unsigned long uint64_t; typedef long intptr_t; typedef unsigned long uintptr_t;
#define INT32_MAX 2147483647
#define UINT32_MAX 4294967295u
"""
# What nvcc's implicit cuda_runtime.h (math.h) gives device code and NVRTC does not: included before the source.
_PRELUDE = b"""#pragma once
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
"""
_HEADERS = {b"stdint.h": _STDINT, b"cstdint": _STDINT, b"autotune_nvrtc_prelude.h": _PRELUDE}


def _include_dirs() -> list[str]:
    """Where cuda_fp16.h / cuda_bf16.h are (NVRTC has no built-in copies): the nvidia-cuda-runtime wheel's
    include folder, else a CUDA toolkit's."""
    import sys

    found = []
    roots = [Path(p) / "nvidia" / sub / "include" for p in sys.path if p
             for sub in ("cu13", "cu12", "cuda_runtime")]  # fmt: skip
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            roots.append(Path(os.environ[env]) / "include")
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(Path(nvcc).resolve().parent.parent / "include")
    roots.append(Path("/usr/local/cuda/include"))
    for root in roots:
        if (root / "cuda_fp16.h").is_file() and str(root) not in found:
            found.append(str(root))
    return found[:1]


def nvrtc_compile(template: str | Path, defines: Mapping[str, object], arch: str) -> bytes:
    """The cubin of ``template`` with ``defines`` for ``arch`` by NVRTC; `ToolchainError` when NVRTC is
    missing or the source does not compile."""
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        raise ToolchainError("NVRTC is not installed: pip install 'autotune[nvrtc]'") from None
    source = template_path(template)

    def check(result: tuple, what: str) -> tuple:
        if result[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise ToolchainError(f"NVRTC {what} failed: {result[0].name}")
        return result[1:]

    (program,) = check(nvrtc.nvrtcCreateProgram(source.read_bytes(), source.name.encode(), len(_HEADERS),
                                                     list(_HEADERS.values()), list(_HEADERS)), "create")
    try:
        options = [f"--gpu-architecture={arch}", "-std=c++17", "-default-device", f"-I{source.parent}",
                   "--pre-include=autotune_nvrtc_prelude.h", *(f"-I{d}" for d in _include_dirs()),
                   *(f"-D{k}={v}" for k, v in sorted(defines.items()))]  # fmt: skip
        result = nvrtc.nvrtcCompileProgram(program, len(options), [o.encode() for o in options])
        if result[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            (size,) = check(nvrtc.nvrtcGetProgramLogSize(program), "log size")
            log = b" " * size
            check(nvrtc.nvrtcGetProgramLog(program, log), "log")
            text = log.decode(errors="replace")
            header = re.search(r'cannot open source file "(cuda_\w+\.h)"', text)
            if header:
                raise ToolchainError(f"NVRTC needs {header.group(1)}, found in no CUDA include folder: pip install "
                                     f"nvidia-cuda-runtime (part of autotune[nvrtc]) or set CUDA_HOME")  # fmt: skip
            lines = [line for line in text.splitlines() if "error" in line.lower()]
            raise ToolchainError(f"NVRTC cannot compile {source.name}: {(lines or ['no message'])[0].strip()}")
        (size,) = check(nvrtc.nvrtcGetCUBINSize(program), "cubin size")
        cubin = b" " * size
        check(nvrtc.nvrtcGetCUBIN(program, cubin), "cubin")
        return bytes(cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(program)


def load_cubin(template: str | Path, defines: Mapping[str, object], arch: str, *, route: str | None = None,
               store: BinaryStore | None = None) -> tuple[bytes, str]:  # fmt: skip
    """A cubin of ``template`` with ``defines`` for ``arch``, and the route that gave it (`ROUTES`).
    ``route`` forces one route (benchmarks, tests); by default the first that can answer."""
    store = store or BinaryStore()
    route = route or os.environ.get(ROUTE_ENV) or None
    if route is not None and route not in ROUTES:
        raise InvalidArgument(f"cubin route {route!r}: expected one of {', '.join(ROUTES)}")
    key = binary_key(template_hash(template), defines, arch)
    if route in (None, CACHED):
        data = store.get(key, arch)
        if data is not None:
            return data, CACHED
        if route == CACHED:
            raise ToolchainError(f"no cubin for {arch} in {store.root}")
    nvcc_missing = None
    if route in (None, NVCC):
        from autotune.runtime.compiler import Compiler

        try:
            compiler = Compiler(arch)
        except ToolchainError as exc:
            if route == NVCC:
                raise
            nvcc_missing = exc
        else:
            result = compiler.compile(template, defines)
            if not result.ok or not result.cubin:
                raise ToolchainError(f"{Path(str(template)).name} does not compile for {arch}: {result.error}")
            return Path(result.cubin).read_bytes(), NVCC
    try:
        data = nvrtc_compile(template, defines, arch)
    except ToolchainError as exc:
        if nvcc_missing is not None and "not installed" in str(exc):
            raise ToolchainError(f"no cached cubin, {nvcc_missing}, and {exc}") from None
        raise
    store.put(key, data, arch)
    return data, NVRTC

