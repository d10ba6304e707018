"""The operators as functions on tensors of any leading shape, the way torch.nn.functional takes them.

These pass activations of any leading dims to the operators as they are (the operators fold them), reshape a vector
or several normalized dims, and copy non-contiguous inputs (``.contiguous()``: a copy only where needed), so they
accept what torch's own functions accept on CUDA; the raw ``torch.ops.autotune.*`` operators refuse non-contiguous
tensors instead.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from autotune.torch.errors import WrongShape


# The operators' overloads (``torch.ops.autotune.<name>.default``: the operator itself, without the overload
# packet's Python layer), bound by `bind` once they are registered: a global lookup per call.
_LAYERNORM: Any = None
_RMSNORM: Any = None
_SOFTMAX: Any = None
_GEMM: Any = None
_GEMM_NT: Any = None
_LINEAR: Any = None
_LINEAR_GELU: Any = None
_LINEAR_SWIGLU: Any = None
_ATTENTION: Any = None
_ATTENTION_CAUSAL: Any = None


def bind() -> None:
    """Look the operators up (autotune.torch does it after registering them)."""
    global _LAYERNORM, _RMSNORM, _SOFTMAX, _GEMM, _GEMM_NT, _LINEAR, _LINEAR_GELU, _LINEAR_SWIGLU
    global _ATTENTION, _ATTENTION_CAUSAL
    ops = torch.ops.autotune
    _LAYERNORM, _RMSNORM, _SOFTMAX, _GEMM = (ops.layernorm.default, ops.rmsnorm.default, ops.softmax.default,
                                             ops.gemm.default)  # fmt: skip
    _GEMM_NT, _LINEAR, _LINEAR_GELU = ops.gemm_nt.default, ops.linear.default, ops.linear_gelu.default
    _LINEAR_SWIGLU = ops.linear_swiglu.default
    _ATTENTION, _ATTENTION_CAUSAL = ops.attention.default, ops.attention_causal.default


# Each function passes a contiguous tensor on as it is, whatever its leading dims (the operators fold them, see
# `autotune.torch.ops`): no reshape or view is called, so a call costs the operator's and a few attribute reads
# (issue 21: ≤ 1 µs), and a training step gets no ViewBackward node per call.
def _dense(t: torch.Tensor) -> torch.Tensor:
    return t if t.is_contiguous() else t.contiguous()


def layer_norm(x: torch.Tensor, normalized_shape: Sequence[int] | int, weight: torch.Tensor,
               bias: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """LayerNorm over the trailing ``normalized_shape`` dims (eps fixed at the kernel's 1e-5)."""
    shape = x.shape
    if type(normalized_shape) is int:
        cols, flat = normalized_shape, True
    elif len(normalized_shape) == 1:
        cols, flat = normalized_shape[0], True
    else:  # several trailing dims: the weights are flattened too
        cols, flat = math.prod(normalized_shape), False
    if flat and len(shape) >= 2 and shape[-1] == cols:  # the common call: rows over the last dim, as they are
        return _LAYERNORM(_dense(x), _dense(weight), _dense(bias))[0]
    dims = len(shape) if flat else len(shape) - len(normalized_shape) + 1
    if dims < 1 or (shape[-1] != cols if flat else shape[dims - 1:] != tuple(normalized_shape)):
        raise WrongShape(f"autotune.layer_norm: x has shape {tuple(shape)}; normalized_shape {normalized_shape} must "
                         f"be its trailing dims")  # fmt: skip
    w, b = _dense(weight).reshape(cols), _dense(bias).reshape(cols)
    return _LAYERNORM(_dense(x.reshape(-1, cols)), w, b)[0].view(shape)


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """RMSNorm over the last dim (eps fixed at the kernel's 1e-6)."""
    if x.dim() >= 2:
        return _RMSNORM(_dense(x), _dense(weight))
    return _RMSNORM(_dense(x.reshape(1, -1)), _dense(weight)).view(x.shape)


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax along ``dim``, which must be the last dim (the kernels work on rows)."""
    shape = x.shape
    if dim != -1 and dim != len(shape) - 1:
        raise WrongShape(f"autotune.softmax: dim={dim}: only the last dim (-1) is supported")
    if len(shape) >= 2:
        return _SOFTMAX(_dense(x))
    return _SOFTMAX(_dense(x.reshape(-1, shape[-1]))).view(shape)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for a of shape (..., K) and a 2-D b of shape (K, N), through the tuned GEMM."""
    if b.dim() != 2:
        raise WrongShape(f"autotune.matmul: b must be 2-D (K, N), got shape {tuple(b.shape)}")
    if a.dim() >= 2:
        return _GEMM(_dense(a), _dense(b))
    return _GEMM(_dense(a.reshape(1, -1)), _dense(b)).view(b.shape[1])


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weightᵀ + bias`` as torch.nn.functional.linear: x of shape (..., in_features), weight
    (out_features, in_features) read as stored (``gemm_nt``, or ``linear`` with the bias in the product)."""
    dims = x.dim()
    if dims == 0 or x.numel() == 0:  # an empty batch (the kernels take no empty matrix), or torch's error
        return torch.nn.functional.linear(x, weight, bias)
    rows = _dense(x) if dims >= 2 else _dense(x).view(1, -1)
    try:
        if bias is None:
            y = _GEMM_NT(rows, _dense(weight))
        else:
            y = _LINEAR(rows, _dense(weight), _dense(bias))
    except WrongShape:  # the operator names its buffers (A, B): say it in the caller's terms
        _refuse_linear_shapes(x.shape, weight, bias)
        raise
    return y if dims >= 2 else y.view(-1)


def linear_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``gelu(x @ weightᵀ + bias, approximate="tanh")`` in one launch plan (``linear_gelu``: GELU in the GEMM's
    epilogue, the sum before it kept for the backward)."""
    dims = x.dim()
    if dims == 0 or x.numel() == 0:
        return torch.nn.functional.gelu(torch.nn.functional.linear(x, weight, bias), approximate="tanh")
    rows = _dense(x) if dims >= 2 else _dense(x).view(1, -1)
    try:
        y = _LINEAR_GELU(rows, _dense(weight), _dense(bias))[0]
    except WrongShape:
        _refuse_linear_shapes(x.shape, weight, bias)
        raise
    return y if dims >= 2 else y.view(-1)


def linear_swiglu(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up`` for ``gate, up = (x @ weightᵀ).chunk(2, -1)``: a gate-and-up projection without bias
    (weight (2·hidden, in_features), the gate rows first) and Llama's SwiGLU after it, in one kernel
    (``linear_swiglu``). The operator has no backward: where a gradient is needed, ``linear`` runs, then torch's
    silu and product."""
    dims = x.dim()
    if dims == 0 or x.numel() == 0 or (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)):
        gate, up = (linear(x, weight) if dims else torch.nn.functional.linear(x, weight)).chunk(2, dim=-1)
        return torch.nn.functional.silu(gate) * up
    rows = _dense(x) if dims >= 2 else _dense(x).view(1, -1)
    y = _LINEAR_SWIGLU(rows, _dense(weight))
    return y if dims >= 2 else y.view(-1)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """softmax(q·kᵀ/√head_dim [+ causal mask])·v for q (batch, heads, seq_q, head_dim) and k, v (batch, kv_heads,
    seq_kv, head_dim), kv_heads dividing heads (grouped-query attention); each copied where not contiguous. The
    causal mask is bottom-right (query i sees key j iff j ≤ i + seq_kv − seq_q): torch's ``is_causal=True`` only
    where seq_q == seq_kv."""
    return (_ATTENTION_CAUSAL if causal else _ATTENTION)(_dense(q), _dense(k), _dense(v))[0]


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
