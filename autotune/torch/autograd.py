"""Backward formulas of the operators (`torch.library.register_autograd`).

* layernorm: our tuned ``layernorm_backward`` kernel (dx, dweight, dbias from the saved mean and rstd);
* gemm: two more GEMMs through the same operator (dA = dC·Bᵀ, dB = Aᵀ·dC; the transposes are copied);
* rmsnorm, softmax: no tuned backward kernel exists yet: torch's own operations, in the input's dtype;
* a family with no entry here (attention until its backward lands) has no autograd: torch raises at backward.

Only the first output of layernorm (y) is differentiable; mean and rstd are statistics for the backward pass.
"""

from __future__ import annotations

from typing import Any

import torch

from autotune.spaces.rmsnorm import EPS as RMS_EPS
from autotune.runtime import torch_native as native
from autotune.torch.ops import _LIBRARY, OPS


def _layernorm_setup(ctx: Any, inputs: tuple, output: tuple) -> None:
    x, weight, _bias = inputs
    _y, mean, rstd = output
    ctx.save_for_backward(x, weight, mean, rstd)
    ctx.mark_non_differentiable(mean, rstd)


def _layernorm_backward(ctx: Any, dy: torch.Tensor, _dmean: Any, _drstd: Any) -> tuple:
    x, weight, mean, rstd = ctx.saved_tensors
    dx, dweight, dbias = torch.ops.autotune.layernorm_backward(dy.contiguous(), x, weight, mean, rstd)
    needs = ctx.needs_input_grad
    return (dx if needs[0] else None, dweight if needs[1] else None, dbias if needs[2] else None)


def _rmsnorm_setup(ctx: Any, inputs: tuple, output: Any) -> None:
    ctx.save_for_backward(*inputs)


def _rmsnorm_backward(ctx: Any, dy: torch.Tensor) -> tuple:
    x, weight = ctx.saved_tensors
    rstd = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + RMS_EPS)
    xhat = x * rstd
    g = dy * weight
    dx = rstd * (g - xhat * (g * xhat).mean(dim=-1, keepdim=True))
    dweight = (dy * xhat).sum(dim=0)
    return dx, dweight


def _softmax_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    ctx.save_for_backward(output)


def _softmax_backward(ctx: Any, dy: torch.Tensor) -> torch.Tensor:
    (y,) = ctx.saved_tensors
    return y * (dy - (dy * y).sum(dim=-1, keepdim=True))


def _gemm_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    ctx.save_for_backward(*inputs)


def _gemm_backward(ctx: Any, dc: torch.Tensor) -> tuple:
    a, b = ctx.saved_tensors
    dc = dc.contiguous()
    gemm = torch.ops.autotune.gemm
    da = gemm(dc, b.t().contiguous()) if ctx.needs_input_grad[0] else None
    db = gemm(a.t().contiguous(), dc) if ctx.needs_input_grad[1] else None
    return da, db


BACKWARDS = {
    "layernorm": (_layernorm_backward, _layernorm_setup),
    "rmsnorm": (_rmsnorm_backward, _rmsnorm_setup),
    "softmax": (_softmax_backward, _softmax_setup),
    "gemm": (_gemm_backward, _gemm_setup),
}


def _fast_autograd(name: str, inputs: int, backward: Any, setup: Any) -> bool:
    """Register the Autograd kernel of ``name`` ourselves: torch's own (torch.library.register_autograd) builds a
    metadata object and goes through Python layers on every call, grad or not. Ours redispatches straight below
    autograd when no input needs a gradient (the inference and CUDA-graph case) and hands the rest to the very
    kernel torch would have made. False where this torch lacks the private helper (then torch's is used)."""
    try:
        from torch._library.autograd import Info, make_autograd_impl
    except ImportError:
        return False
    overload = getattr(torch.ops.autotune, name).default
    with_grad = make_autograd_impl(overload, Info(backward, setup))
    below = torch._C._after_autograd_keyset
    grad_enabled = torch._C.is_grad_enabled
    any_requires_grad = torch._C._any_requires_grad
    below_autograd = torch._C._AutoDispatchBelowAutograd
    redispatch = overload.redispatch

    def kernel(keyset: Any, *args: Any) -> Any:
        if grad_enabled() and any_requires_grad(*args):
            return with_grad(keyset, *args)
        with below_autograd():
            return redispatch(keyset & below, *args)

    # The same decision in C++ where the native launcher is loaded: no Python at all on the no-grad path.
    if not native.register_autograd(name, inputs, with_grad):
        _LIBRARY.impl(name, kernel, "Autograd", with_keyset=True)
    return True


def register_autograd() -> list[str]:
    """Attach the backward of every registered operator that has one (layernorm's needs layernorm_backward)."""
    done = []
    for kernel, (backward, setup) in BACKWARDS.items():
        info = OPS.get(kernel)
        if info is None or (kernel == "layernorm" and "layernorm_backward" not in OPS):
            continue
        if not _fast_autograd(info.name, len(info.inputs), backward, setup):
            torch.library.register_autograd(info.qualname, backward, setup_context=setup, lib=_LIBRARY)
        done.append(kernel)
    return done
