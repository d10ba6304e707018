"""The library's kernel families as PyTorch custom operators, ``torch.ops.autotune.<kernel>``.

Each operator is built from its kernel space alone: the schema from the space's input and output buffers, the
fake (meta) implementation from its shape inference and output specs, the real one from the dispatcher. So an
operator exists for every family in `FAMILIES` that is present when this module is imported and for any space
given to `register`.

The raw operators take the space's shapes (e.g. layernorm's x is (rows, cols); attention's q is
(batch, heads, seq_q, head_dim), k and v (batch, kv_heads, seq_kv, head_dim), kv_heads dividing heads: grouped-query
and multi-query attention, query head h reading kv head h // (heads / kv_heads), the shape inferred from k) and
refuse non-contiguous tensors (`NotContiguous`); `autotune.torch.functional` copies for you. The activations of the
row kernels and GEMMs (the space's `leading_dims`: layernorm's x, a GEMM's A, ...) may come with several leading
dims, e.g. (batch, seq, hidden), alike across one call's activations: the kernel reads them as one, and the outputs
that carry them get them back, so a model's 3-D activations need no reshape or view (each an operator and, in
training, an autograd node of its own). ``attention_causal`` masks bottom-right (query i sees key j iff
j ≤ i + seq_kv − seq_q), where torch's ``is_causal=True`` masks top-left: the same only where seq_q == seq_kv.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from autotune.errors import AutotuneError, InvalidArgument
from autotune.runtime import call_log
from autotune.runtime.arrays import dtype_name
from autotune.spaces import KernelSpace, get_space, kernel_names, space_class
from autotune.runtime import torch_native as native
from autotune.torch.errors import NotContiguous, WrongDevice, WrongDtype, WrongShape
from autotune.torch.launch import Launcher

log = logging.getLogger("autotune.torch")
NAMESPACE = "autotune"
# Library families offered as operators, where present (others' spaces may land later: see module docstring).
FAMILIES = ("layernorm", "layernorm_backward", "rmsnorm", "softmax", "softmax_backward", "gemm", "gemm_nt", "gemm_tn",
            "linear", "linear_gelu", "linear_swiglu", "bias_grad", "gelu_bias_grad", "attention", "attention_backward",
            "attention_causal", "attention_causal_backward")


@dataclass
class OpInfo:
    """One operator: its kernel, buffer names, and launch path."""

    kernel: str  # a library kernel's name, or a user space's file.py:Class reference
    name: str  # the operator's name: torch.ops.autotune.<name>
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    dtypes: tuple[str, ...]
    launcher: Launcher
    op: Any = None  # torch.ops.autotune.<name>, the OpOverloadPacket
    _spaces: dict[str, KernelSpace] = field(default_factory=dict)

    @property
    def qualname(self) -> str:
        return f"{NAMESPACE}::{self.name}"

    def space(self, dtype: str) -> KernelSpace:
        space = self._spaces.get(dtype)
        if space is None:
            space = self._spaces[dtype] = get_space(self.kernel, dtype=dtype)
        return space

    def problem(self, tensors: Sequence[torch.Tensor]) -> tuple[KernelSpace, tuple[Any, ...], tuple | None]:
        """The space and problem shape of a call, and the leading dims its activations had (None: the kernel's
        own ranks; `KernelSpace.flatten_leading`); metadata only (fake tensors too). Raises in torch's style."""
        given = {name: dtype_name(t.dtype) for name, t in zip(self.inputs, tensors)}
        try:
            dtype = type(self.space(self.dtypes[0])).infer_dtype(given)
        except AutotuneError as exc:
            raise WrongDtype(f"autotune.{self.name}: {exc}") from None
        space = self.space(dtype)
        shapes = flat = {name: tuple(t.shape) for name, t in zip(self.inputs, tensors)}
        try:
            flat, leading = space.flatten_leading(shapes)
            shape = space.infer_shape(flat)
        except AutotuneError as exc:
            given = "" if flat == shapes else f" (their leading dims folded; given {_shapes_text(shapes)})"
            raise WrongShape(f"autotune.{self.name}: {exc}{given}") from None
        return space, shape, leading

    def output_shapes(self, space: KernelSpace, shape: tuple[Any, ...], leading: tuple | None) -> list[tuple]:
        """The outputs' shapes for a problem whose activations had ``leading`` dims."""
        return [space.leading_shape(name, spec.shape, leading) for name, spec in space.outputs(shape).items()]

    def check_device(self, tensors: Sequence[torch.Tensor]) -> None:
        first = tensors[0].device
        for name, t in zip(self.inputs, tensors):
            if t.device.type != "cuda":
                raise WrongDevice(f"autotune.{self.name}: {name} is on {t.device}; autotune's kernels take CUDA "
                                  f"tensors")  # fmt: skip
            if t.device != first:
                raise WrongDevice(f"autotune.{self.name}: {name} is on {t.device} but {self.inputs[0]} is on "
                                  f"{first}")  # fmt: skip

    def check_layout(self, tensors: Sequence[torch.Tensor]) -> None:
        """Contiguous inputs only, checked when tracing too (the fake implementation) so that torch.compile
        reports it where the eager call would."""
        for name, t in zip(self.inputs, tensors):
            if not t.is_contiguous():
                raise NotContiguous(f"autotune.{self.name}: {name} is not contiguous (shape {tuple(t.shape)}, "
                                    f"strides {t.stride()}): pass {name}.contiguous(), or use "
                                    f"autotune.torch.functional, which copies")  # fmt: skip


def _shapes_text(shapes: dict[str, tuple]) -> str:
    return ", ".join(f"{name} {tuple(shape)}" for name, shape in shapes.items())


OPS: dict[str, OpInfo] = {}
_LIBRARY = torch.library.Library(NAMESPACE, "DEF")  # kept alive for the process: the registrations live in it


def _schema(info: OpInfo) -> str:
    args = ", ".join(f"Tensor {name}" for name in info.inputs)
    if len(info.outputs) == 1:
        return f"({args}) -> Tensor"
    return f"({args}) -> ({', '.join('Tensor' for _ in info.outputs)})"


def _note(space: KernelSpace, shape: tuple[Any, ...]) -> None:
    if call_log.ACTIVE and all(type(d) is int for d in shape):  # symbolic sizes (torch.compile) are not recorded
        call_log.note(call_log.record_name(space), shape, space.dtype)


def register(kernel: str) -> OpInfo:
    """The operator ``torch.ops.autotune.<name>`` for a kernel space, by library name or ``file.py:Class``
    reference (named after the space's ``name``); defined once, then reused."""
    if kernel in OPS:
        return OPS[kernel]
    cls = space_class(kernel)
    space = get_space(kernel)
    name = re.sub(r"\W", "_", space.name)
    if name in OPS:
        if OPS[name].kernel != kernel and space_class(OPS[name].kernel) is not cls:
            raise InvalidArgument(f"autotune.torch: an operator named {name} exists already (for "
                                  f"{OPS[name].kernel})")  # fmt: skip
        return OPS[name]
    default = space.default_shape
    info = OpInfo(kernel, name, tuple(space.input_specs(default)), tuple(space.outputs(default)),
                  tuple(cls.supported_dtypes()), Launcher(kernel))  # fmt: skip
    single = len(info.outputs) == 1

    def check(tensors: Sequence[torch.Tensor]) -> None:
        info.check_device(tensors)
        info.check_layout(tensors)
        info.problem(tensors)  # dtype and shapes, with torch-style errors, before the dispatcher sees them

    def impl(*tensors: torch.Tensor) -> Any:
        # Device, dtype, shape and contiguity are checked by the launcher's plan lookup (a dict key); anything
        # it has not seen goes through `check`, which explains the mistake in torch's style.
        results = info.launcher(tensors)
        return results[0] if single else results

    def fake(*tensors: torch.Tensor) -> Any:
        info.check_layout(tensors)
        space, shape, leading = info.problem(tensors)
        _note(space, shape)  # with meta tensors, a model's problems are recorded without a GPU
        made = tuple(tensors[0].new_empty(size, dtype=getattr(torch, spec.dtype)) for size, spec in
                     zip(info.output_shapes(space, shape, leading), space.outputs(shape).values()))  # fmt: skip
        return made[0] if single else made

    info.launcher.validate = check
    # The low-level registration, not torch.library.custom_op: custom_op wraps every call in Python layers of its
    # own (about 8 µs a call on a CPU); this keeps the same fake, autograd and opcheck support at a third of it.
    # The CUDA kernel is C++ where the native launcher builds (`autotune.torch.native`), asking Python only for
    # a new key's plan (`info.launcher` is looked up per key: `release` replaces it). The CPU kernel only raises
    # WrongDevice, where torch would say "no kernel for the CPU backend".
    _LIBRARY.define(name + _schema(info))
    if not native.register_cuda(name, len(info.inputs), lambda *tensors: info.launcher.prepared(*tensors)):
        _LIBRARY.impl(name, impl, "CUDA")
    _LIBRARY.impl(name, impl, "CPU")
    torch.library.register_fake(info.qualname, fake, lib=_LIBRARY)
    info.op = getattr(torch.ops.autotune, name)
    OPS[name] = info
    return info


def op(kernel: str) -> Any:
    """``torch.ops.autotune.<name>`` (the overload packet) of a kernel, registering it if needed."""
    return getattr(torch.ops.autotune, register(kernel).name)


def register_library() -> list[str]:
    """Register every family of `FAMILIES` present in this installation; their names. A family whose space
    cannot describe its buffers (one still being written) is left out with a warning, not an import error."""
    present = set(kernel_names())
    done = []
    for name in FAMILIES:
        if name not in present:
            continue
        try:
            done.append(register(name).kernel)
        except (AutotuneError, NotImplementedError, KeyError, TypeError) as exc:
            log.warning("autotune.torch: no operator for %s: %s", name, exc)
    return done
