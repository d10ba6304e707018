"""The operators as functions on tensors of any leading shape, the way torch.nn.functional takes them.

These reshape to the kernels' 2-D problems and copy non-contiguous inputs (``.contiguous()``: a copy only where
needed), so they accept what torch's own functions accept on CUDA; the raw ``torch.ops.autotune.*`` operators
refuse non-contiguous tensors instead.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from autotune.torch.errors import WrongShape


def _rows(x: torch.Tensor, cols: int) -> torch.Tensor:
    """``x`` as the contiguous (rows, cols) matrix the kernels take: itself where it is one already (no call)."""
    if x.dim() == 2 and x.is_contiguous():
        return x
    return x.reshape(-1, cols).contiguous()


def _vector(w: torch.Tensor, cols: int) -> torch.Tensor:
    return w if w.dim() == 1 and w.is_contiguous() else w.reshape(cols).contiguous()


def _like(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return y if x.dim() == 2 else y.view(x.shape)


def layer_norm(x: torch.Tensor, normalized_shape: Sequence[int] | int, weight: torch.Tensor,
               bias: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """LayerNorm over the trailing ``normalized_shape`` dims (eps fixed at the kernel's 1e-5)."""
    dims = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if x.shape[x.dim() - len(dims):] != dims:
        raise WrongShape(f"autotune.layer_norm: x has shape {tuple(x.shape)}; normalized_shape {dims} must be "
                         f"its trailing dims")  # fmt: skip
    cols = dims[0] if len(dims) == 1 else math.prod(dims)
    y, _mean, _rstd = torch.ops.autotune.layernorm(_rows(x, cols), _vector(weight, cols), _vector(bias, cols))
    return _like(y, x)


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """RMSNorm over the last dim (eps fixed at the kernel's 1e-6)."""
    cols = weight.numel()
    return _like(torch.ops.autotune.rmsnorm(_rows(x, cols), _vector(weight, cols)), x)


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax along ``dim``, which must be the last dim (the kernels work on rows)."""
    if dim != -1 and dim != x.dim() - 1:
        raise WrongShape(f"autotune.softmax: dim={dim}: only the last dim (-1) is supported")
    return _like(torch.ops.autotune.softmax(_rows(x, x.shape[-1])), x)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for a of shape (..., K) and a 2-D b of shape (K, N), through the tuned GEMM."""
    if b.dim() != 2:
        raise WrongShape(f"autotune.matmul: b must be 2-D (K, N), got shape {tuple(b.shape)}")
    c = torch.ops.autotune.gemm(_rows(a, a.shape[-1]), b if b.is_contiguous() else b.contiguous())
    return c if a.dim() == 2 else c.view(*a.shape[:-1], b.shape[1])


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weightᵀ + bias`` as torch.nn.functional.linear (the transposed weight is copied per call)."""
    y = matmul(x, weight.t())
    return y if bias is None else y + bias
