"""The operators as functions on tensors of any leading shape, the way torch.nn.functional takes them.

These reshape to the kernels' 2-D problems and copy non-contiguous inputs (``.contiguous()``: a copy only where
needed), so they accept what torch's own functions accept on CUDA; the raw ``torch.ops.autotune.*`` operators
refuse non-contiguous tensors instead.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from autotune.torch.errors import NotContiguous, WrongShape


# The operators' overloads (``torch.ops.autotune.<name>.default``: the operator itself, without the overload
# packet's Python layer), bound by `bind` once they are registered: a global lookup per call.
_LAYERNORM: Any = None
_RMSNORM: Any = None
_SOFTMAX: Any = None
_GEMM: Any = None
_GEMM_NT: Any = None
_LINEAR: Any = None
_LINEAR_GELU: Any = None


def bind() -> None:
    """Look the operators up (autotune.torch does it after registering them)."""
    global _LAYERNORM, _RMSNORM, _SOFTMAX, _GEMM, _GEMM_NT, _LINEAR, _LINEAR_GELU
    ops = torch.ops.autotune
    _LAYERNORM, _RMSNORM, _SOFTMAX, _GEMM = (ops.layernorm.default, ops.rmsnorm.default, ops.softmax.default,
                                             ops.gemm.default)  # fmt: skip
    _GEMM_NT, _LINEAR, _LINEAR_GELU = ops.gemm_nt.default, ops.linear.default, ops.linear_gelu.default


# Each function passes a tensor on as it is where it already is the contiguous matrix or vector the kernel takes:
# no reshape or copy is called, so a call costs the operator's and a few attribute reads (issue 21: ≤ 1 µs).
def layer_norm(x: torch.Tensor, normalized_shape: Sequence[int] | int, weight: torch.Tensor,
               bias: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """LayerNorm over the trailing ``normalized_shape`` dims (eps fixed at the kernel's 1e-5)."""
    shape = x.shape
    # The common call first, with the fewest checks: rows of a contiguous matrix over its last dim.
    if len(shape) == 2 and x.is_contiguous():
        if type(normalized_shape) is int:
            cols = normalized_shape
        else:
            cols = normalized_shape[0] if len(normalized_shape) == 1 else 0
        if cols == shape[1]:
            try:
                return _LAYERNORM(x, weight, bias)[0]
            except NotContiguous:  # a strided weight or bias (rare): copied below, not checked on every call
                pass
    if type(normalized_shape) is int:
        cols, flat = normalized_shape, True
    elif len(normalized_shape) == 1:
        cols, flat = normalized_shape[0], True
    else:  # several trailing dims: the weights are flattened too
        cols, flat = math.prod(normalized_shape), False
    dims = len(shape) if flat else len(shape) - len(normalized_shape) + 1
    if dims < 1 or (shape[-1] != cols if flat else shape[dims - 1:] != tuple(normalized_shape)):
        raise WrongShape(f"autotune.layer_norm: x has shape {tuple(shape)}; normalized_shape {normalized_shape} must "
                         f"be its trailing dims")  # fmt: skip
    rows = x if len(shape) == 2 and flat and x.is_contiguous() else x.reshape(-1, cols).contiguous()
    w = weight if weight.is_contiguous() else weight.contiguous()
    b = bias if bias.is_contiguous() else bias.contiguous()
    if not flat:
        w, b = w.reshape(cols), b.reshape(cols)
    y = _LAYERNORM(rows, w, b)[0]
    return y if len(shape) == 2 else y.view(shape)


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """RMSNorm over the last dim (eps fixed at the kernel's 1e-6)."""
    shape = x.shape
    if len(shape) == 2 and x.is_contiguous():
        try:
            return _RMSNORM(x, weight)
        except NotContiguous:  # a strided weight (rare): copied below, not checked on every call
            pass
    rows = x if len(shape) == 2 and x.is_contiguous() else x.reshape(-1, shape[-1]).contiguous()
    y = _RMSNORM(rows, weight if weight.is_contiguous() else weight.contiguous())
    return y if len(shape) == 2 else y.view(shape)


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax along ``dim``, which must be the last dim (the kernels work on rows)."""
    shape = x.shape
    if dim != -1 and dim != len(shape) - 1:
        raise WrongShape(f"autotune.softmax: dim={dim}: only the last dim (-1) is supported")
    if len(shape) == 2 and x.is_contiguous():
        return _SOFTMAX(x)
    return _SOFTMAX(x.reshape(-1, shape[-1]).contiguous()).view(shape)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for a of shape (..., K) and a 2-D b of shape (K, N), through the tuned GEMM."""
    if b.dim() != 2:
        raise WrongShape(f"autotune.matmul: b must be 2-D (K, N), got shape {tuple(b.shape)}")
    shape = a.shape
    rows = a if len(shape) == 2 and a.is_contiguous() else a.reshape(-1, shape[-1]).contiguous()
    c = _GEMM(rows, b if b.is_contiguous() else b.contiguous())
    return c if len(shape) == 2 else c.view(*shape[:-1], b.shape[1])


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weightᵀ + bias`` as torch.nn.functional.linear: x of shape (..., in_features), weight
    (out_features, in_features) read as stored (``gemm_nt``, or ``linear`` with the bias in the product)."""
    shape = x.shape
    if len(shape) == 0 or x.numel() == 0:  # an empty batch (the kernels take no empty matrix), or torch's error
        return torch.nn.functional.linear(x, weight, bias)
    rows = x if len(shape) == 2 and x.is_contiguous() else x.reshape(-1, shape[-1]).contiguous()
    w = weight if weight.is_contiguous() else weight.contiguous()
    try:
        if bias is None:
            y = _GEMM_NT(rows, w)
        else:
            y = _LINEAR(rows, w, bias if bias.is_contiguous() else bias.contiguous())
    except WrongShape:  # the operator names its buffers (A, B): say it in the caller's terms
        _refuse_linear_shapes(shape, weight, bias)
        raise
    return y if len(shape) == 2 else y.view(*shape[:-1], weight.shape[0])


def linear_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``gelu(x @ weightᵀ + bias, approximate="tanh")`` in one launch plan (``linear_gelu``: GELU in the GEMM's
    epilogue, the sum before it kept for the backward)."""
    shape = x.shape
    if len(shape) == 0 or x.numel() == 0:
        return torch.nn.functional.gelu(torch.nn.functional.linear(x, weight, bias), approximate="tanh")
    rows = x if len(shape) == 2 and x.is_contiguous() else x.reshape(-1, shape[-1]).contiguous()
    w = weight if weight.is_contiguous() else weight.contiguous()
    try:
        y = _LINEAR_GELU(rows, w, bias if bias.is_contiguous() else bias.contiguous())[0]
    except WrongShape:
        _refuse_linear_shapes(shape, weight, bias)
        raise
    return y if len(shape) == 2 else y.view(*shape[:-1], weight.shape[0])


def _refuse_linear_shapes(shape: torch.Size, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    """Raise WrongShape naming x, weight or bias where they do not fit F.linear's shapes."""
    if weight.dim() != 2:
        raise WrongShape(f"autotune.linear: weight must be 2-D (out_features, in_features), got shape "
                         f"{tuple(weight.shape)}")  # fmt: skip
    if shape[-1] != weight.shape[1]:
        raise WrongShape(f"autotune.linear: x has {shape[-1]} features (its last dim) but weight has in_features "
                         f"{weight.shape[1]}: weight is (out_features, in_features)")  # fmt: skip
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise WrongShape(f"autotune.linear: bias has shape {tuple(bias.shape)}: it must be ({weight.shape[0]},), "
                         f"one per out_feature")  # fmt: skip
