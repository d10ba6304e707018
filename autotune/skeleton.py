"""``autotune new-kernel NAME``: a kernel of your own to start from — a template and its space, which together
already search, validate and dispatch (an elementwise C = A + B), for you to edit into your kernel."""

from __future__ import annotations

import re
from pathlib import Path

from autotune.errors import InvalidArgument

TEMPLATE = r'''// __NAME__: C = A + B over n floats, the starting point written by `autotune new-kernel`.
// Tunables are macros with defaults equal to the space's default_config; the entry point is extern "C" (named
// __NAME___kernel: CUDA's headers already declare many plain names, such as max, sqrt, float4 or printf).

#include <stdint.h>

#ifndef BLOCK
#define BLOCK 256  // threads per block
#endif
#ifndef VEC
#define VEC 4  // floats per access (1, 2 or 4)
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
__NAME___kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, long long n) {
    const bool aligned = ((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) % (VEC * sizeof(float)) == 0;
    const long long i = ((long long)blockIdx.x * BLOCK + threadIdx.x) * VEC;
    if (VEC == 4 && aligned && i + 4 <= n) {
        float4 x = *reinterpret_cast<const float4*>(a + i), y = *reinterpret_cast<const float4*>(b + i);
        *reinterpret_cast<float4*>(c + i) = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
        return;
    }
    for (int k = 0; k < VEC; ++k) {
        if (i + k < n) c[i + k] = a[i + k] + b[i + k];
    }
}
'''

SPACE = '''"""The space of __NAME__.cu (written by `autotune new-kernel`; edit both files into your kernel).

    autotune search ./__NAME___space.py:__CLASS__ --shape 16777216 --trials 20
    autotune best ./__NAME___space.py:__CLASS__
    kernel = autotune.load("./__NAME___space.py:__CLASS__"); c = kernel(a, b)

``template`` is relative: the file beside this one.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from autotune.errors import InvalidArgument
from autotune.spaces import BufferSpec, KernelSpace, Launch, Param
from autotune.spaces.base import ceil_div


class __CLASS__(KernelSpace):
    name = "__NAME__"
    template = "__NAME__.cu"
    dims = ("N",)  # the problem shape's dimensions, e.g. ("M", "N", "K")
    default_shape = (1 << 24,)
    metric_unit = "GB/s"  # or "TFLOP/s": what work() counts per second
    parameters = (
        Param("BLOCK", (64, 128, 256, 512, 1024), "threads per block"),
        Param("VEC", (1, 2, 4), "floats per access"),
    )
    default_config = {"BLOCK": 256, "VEC": 4}  # equal to the template's macro defaults

    def constraints(self, config, shape, device) -> list[str]:
        """Reasons a configuration cannot run on this device for this shape (empty: it can)."""
        if config["BLOCK"] > device.max_threads_per_block:
            return [f"{config['BLOCK']} threads per block > the device's {device.max_threads_per_block}"]
        return []

    def launches(self, config, shape, device) -> list[Launch]:
        (n,) = shape
        blocks = ceil_div(n, config["BLOCK"] * config["VEC"])
        return [Launch("__NAME___kernel", (blocks, 1, 1), (config["BLOCK"], 1, 1), 0, ("A", "B", "C", np.int64(n)))]

    def input_specs(self, shape) -> dict[str, BufferSpec]:
        return {"A": BufferSpec(shape), "B": BufferSpec(shape)}

    def outputs(self, shape) -> dict[str, BufferSpec]:
        return {"C": BufferSpec(shape)}

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> tuple[int, ...]:
        a, b = tuple(inputs["A"]), tuple(inputs["B"])
        if len(a) != 1 or a[0] == 0:
            raise InvalidArgument(f"A must be a non-empty 1-D array, got shape {a}")
        if b != a:
            raise InvalidArgument(f"B has shape {b}, A has {a}")
        return a

    def reference(self, inputs, shape) -> dict[str, np.ndarray]:
        """The right answer in float64 (numpy), from the inputs' values."""
        return {"C": inputs["A"].astype(np.float64) + inputs["B"]}

    def tolerance(self, output: str, shape) -> float:
        return 1e-6  # relative norm error allowed against the float64 reference

    def validation_shapes(self, shape) -> list[tuple[int, ...]]:
        return [(1,), (7,), (1_000_003,), shape]

    def work(self, shape) -> float:
        return 12.0 * shape[0]  # bytes moved (GB/s); FLOPs for TFLOP/s
'''


def class_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_")) + "Space"


# C and C++ keywords and alternative tokens (the lower-case ones: all a kernel name can spell).
RESERVED = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class
    compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype
    default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline
    int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public register
    reinterpret_cast requires restrict return short signed sizeof static static_assert static_cast struct switch
    template this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile
    wchar_t while xor xor_eq
""".split())


def check_name(name: str) -> None:
    """A name for a kernel of one's own: a C identifier that is no keyword, and no library kernel's name (its
    studies and stored rows are keyed by name: they would mix with the library kernel's)."""
    from autotune.spaces import kernel_names

    if not re.fullmatch(r"[a-z][a-z0-9_]{0,62}", name):
        raise InvalidArgument(f"kernel name {name!r}: use lower-case letters, digits and _, starting with a letter "
                              f"(it is a C identifier and a Python module name)")  # fmt: skip
    if name in RESERVED:
        raise InvalidArgument(f"kernel name {name!r} is a C or C++ keyword: pick another (it names CUDA code)")
    if name in kernel_names():
        raise InvalidArgument(f"kernel name {name!r} is a library kernel's: pick another (studies and tuned rows are "
                              f"stored by name, and would mix with the library's {name})")  # fmt: skip


def write(name: str, directory: Path) -> list[Path]:
    """Write ``NAME.cu`` and ``NAME_space.py`` into ``directory``; refuses to overwrite anything."""
    check_name(name)
    if not directory.is_dir():
        raise InvalidArgument(f"directory {directory} does not exist")
    files = {directory / f"{name}.cu": TEMPLATE, directory / f"{name}_space.py": SPACE}
    existing = [str(p) for p in files if p.exists()]
    if existing:
        raise InvalidArgument(f"{', '.join(existing)} already exist: nothing written")
    for path, text in files.items():
        try:
            path.write_text(text.replace("__NAME__", name).replace("__CLASS__", class_name(name)))
        except OSError as exc:
            raise InvalidArgument(f"cannot write {path}: {exc.strerror}") from None
    return list(files)
