"""Backward formulas of the operators (`torch.library.register_autograd`). Where the C++ launcher is loaded
(`autotune.runtime.torch_native`), the GEMMs', linear's, linear_gelu's, layernorm's and half-precision attention's
run as the same formulas in C++ (`NATIVE_FORMULAS`, autotune/runtime/torch_autograd.h): a training call then records
a C++ autograd node, as torch's own operators do, and no Python runs per call; the functions below serve the rest,
and every operator where the launcher is not loaded.

* layernorm: our tuned ``layernorm_backward`` kernel (dx, dweight, dbias from the saved mean and rstd);
* gemm, gemm_nt, gemm_tn, linear: each GEMM's two gradients are the other layouts' products, with no operand
  copied (gemm: dA = gemm_nt(dC, B), dB = gemm_tn(A, dC); gemm_nt and linear: dA = gemm(dC, B),
  dB = gemm_tn(dC, A); gemm_tn: dA = gemm_nt(B, dC), dB = gemm(A, dC)); linear's dbias is dC summed over rows
  by ``bias_grad`` (fp32 accumulation, rounded once, as torch's sum);
* linear_gelu (C = gelu_tanh(pre), pre = A·Bᵀ + bias): ``gelu_bias_grad`` makes dpre = dC·gelu'(pre) and its row
  sum dbias in one pass, then linear's products of dpre;
* attention, attention_causal: our tuned ``attention_backward`` / ``attention_causal_backward`` kernels (dq, dk,
  dv from the saved q, k, v, o and lse), float16 and bfloat16 only: float32 attention has no backward kernel, and
  its backward raises `WrongDtype` (the forward runs; torch's own SDPA trains in float32);
* softmax: our tuned ``softmax_backward`` kernel (dx = y·(dy − Σ dy·y) from the saved output y);
* rmsnorm: torch's own operations, in the input's dtype (its forward keeps no rstd for ``rmsnorm_backward``);
* linear_swiglu: forward only (`FORWARD_ONLY`): a call that needs a gradient raises `NoBackward`, naming the
  functions that train (torch would only warn, and leave the gradients None);
* a family with no entry here has no autograd: torch raises at backward.

Attention with fewer kv heads than query heads (grouped-query) gets dk and dv of k's and v's own shapes: the backward
kernel sums each kv head's gradient over its group's query heads.

Only the first output of layernorm (y), linear_gelu (C) and attention (o) is differentiable; mean, rstd, pre and lse
are kept for the backward pass. A forward whose backward is a kernel of its own gets no autograd at all where that
family is not registered (`NEEDS`), rather than one that fails at its first backward.

Causal attention masks bottom-right (query i sees key j iff j ≤ i + seq_kv − seq_q), and so do its gradients;
torch's ``is_causal=True`` masks top-left. The two agree only where seq_q == seq_kv.
"""

from __future__ import annotations

from typing import Any

import torch

from autotune.runtime import torch_native as native
from autotune.runtime.arrays import dtype_name
from autotune.spaces.rmsnorm import EPS as RMS_EPS
from autotune.torch.errors import NoBackward, WrongDtype
from autotune.torch.ops import _LIBRARY, OPS


# The statistics' gradients (mean, rstd, lse) are never used: autograd would otherwise materialize each as a tensor
# of zeros (a torch.zeros, with its fill kernel, per backward call); unmaterialized, they and an unused output's
# gradient arrive as None.
def _layernorm_setup(ctx: Any, inputs: tuple, output: tuple) -> None:
    x, weight, _bias = inputs
    _y, mean, rstd = output
    ctx.save_for_backward(x, weight, mean, rstd)
    ctx.mark_non_differentiable(mean, rstd)
    ctx.set_materialize_grads(False)


def _layernorm_backward(ctx: Any, dy: torch.Tensor | None, _dmean: Any, _drstd: Any) -> tuple:
    if dy is None:  # y unused: no gradient flows
        return None, None, None
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
    dweight = (dy * xhat).sum(dim=tuple(range(dy.dim() - 1)))  # over every leading dim (N-D activations)
    return dx, dweight


def _softmax_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    ctx.save_for_backward(output)


def _softmax_backward(ctx: Any, dy: torch.Tensor) -> torch.Tensor:
    (y,) = ctx.saved_tensors
    return torch.ops.autotune.softmax_backward(y, dy.contiguous())


def _gemm_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    ctx.save_for_backward(*inputs)


def _gemm_backward(ctx: Any, dc: torch.Tensor) -> tuple:
    a, b = ctx.saved_tensors
    dc, ops, needs = dc.contiguous(), torch.ops.autotune, ctx.needs_input_grad
    return (ops.gemm_nt(dc, b) if needs[0] else None, ops.gemm_tn(a, dc) if needs[1] else None)


def _gemm_nt_backward(ctx: Any, dc: torch.Tensor) -> tuple:
    a, b = ctx.saved_tensors[:2]
    dc, ops, needs = dc.contiguous(), torch.ops.autotune, ctx.needs_input_grad
    return (ops.gemm(dc, b) if needs[0] else None, ops.gemm_tn(dc, a) if needs[1] else None)


def _gemm_tn_backward(ctx: Any, dc: torch.Tensor) -> tuple:
    a, b = ctx.saved_tensors
    dc, ops, needs = dc.contiguous(), torch.ops.autotune, ctx.needs_input_grad
    return (ops.gemm_nt(b, dc) if needs[0] else None, ops.gemm(a, dc) if needs[1] else None)


def _linear_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    ctx.save_for_backward(*inputs[:2])


def _linear_backward(ctx: Any, dc: torch.Tensor) -> tuple:
    da, db = _gemm_nt_backward(ctx, dc)
    dbias = torch.ops.autotune.bias_grad(dc.contiguous()) if ctx.needs_input_grad[2] else None
    return da, db, dbias


def _linear_gelu_setup(ctx: Any, inputs: tuple, output: tuple) -> None:
    _c, pre = output
    ctx.save_for_backward(inputs[0], inputs[1], pre)
    ctx.mark_non_differentiable(pre)
    ctx.set_materialize_grads(False)


def _linear_gelu_backward(ctx: Any, dc: torch.Tensor | None, _dpre: Any) -> tuple:
    if dc is None:  # C unused: no gradient flows
        return None, None, None
    a, b, pre = ctx.saved_tensors
    ops, needs = torch.ops.autotune, ctx.needs_input_grad
    dpre, dbias = ops.gelu_bias_grad(dc.contiguous(), pre)
    return (ops.gemm(dpre, b) if needs[0] else None, ops.gemm_tn(dpre, a) if needs[1] else None,
            dbias if needs[2] else None)  # fmt: skip


def _attention_setup(ctx: Any, inputs: tuple, output: tuple) -> None:
    q, k, v = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.mark_non_differentiable(lse)
    ctx.set_materialize_grads(False)


def _attention_grads(backward: str, ctx: Any, do: torch.Tensor | None) -> tuple:
    """dq, dk, dv from the ``backward`` operator: (q, k, v, o, do, lse) -> (dq, dk, dv), its space's buffer order."""
    if do is None:  # o unused: no gradient flows
        return None, None, None
    q, k, v, o, lse = ctx.saved_tensors
    info = OPS[backward]
    if dtype_name(q.dtype) not in info.dtypes:
        # Checked here, not left to the backward operator, so that the error names the forward the user called.
        raise WrongDtype(f"autotune.{backward.replace('_backward', '')}: no backward kernel for {dtype_name(q.dtype)} "
                         f"({backward} takes {', '.join(info.dtypes)}); train in one of those, or with torch's "
                         f"scaled_dot_product_attention")  # fmt: skip
    # do may be a view (a transpose after the op): the kernel reads contiguous.
    dq, dk, dv = info.op(q, k, v, o, do.contiguous(), lse)
    needs = ctx.needs_input_grad
    return (dq if needs[0] else None, dk if needs[1] else None, dv if needs[2] else None)


def _attention_backward(ctx: Any, do: torch.Tensor, _dlse: Any) -> tuple:
    return _attention_grads("attention_backward", ctx, do)


def _attention_causal_backward(ctx: Any, do: torch.Tensor, _dlse: Any) -> tuple:
    return _attention_grads("attention_causal_backward", ctx, do)


BACKWARDS = {
    "layernorm": (_layernorm_backward, _layernorm_setup),
    "rmsnorm": (_rmsnorm_backward, _rmsnorm_setup),
    "softmax": (_softmax_backward, _softmax_setup),
    "gemm": (_gemm_backward, _gemm_setup),
    "gemm_nt": (_gemm_nt_backward, _gemm_setup),
    "gemm_tn": (_gemm_tn_backward, _gemm_setup),
    "linear": (_linear_backward, _linear_setup),
    "linear_gelu": (_linear_gelu_backward, _linear_gelu_setup),
    "attention": (_attention_backward, _attention_setup),
    "attention_causal": (_attention_causal_backward, _attention_setup),
}
# The backward operators each of these forwards calls: without them registered, the forward gets no autograd.
GEMMS = ("gemm", "gemm_nt", "gemm_tn")
NEEDS: dict[str, tuple[str, ...]] = {
    "layernorm": ("layernorm_backward",),
    "softmax": ("softmax_backward",),
    "attention": ("attention_backward",),
    "attention_causal": ("attention_causal_backward",),
    **{name: GEMMS for name in GEMMS},
    "linear": (*GEMMS, "bias_grad"),
    "linear_gelu": (*GEMMS, "gelu_bias_grad"),
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


# Operators without a backward, and what trains instead.
FORWARD_ONLY = {
    "linear_swiglu": "autotune.torch.functional.linear_swiglu and LinearSwiGLU train, through linear and torch's silu",
}


def _refuse_gradients(name: str, inputs: int) -> None:
    """The Autograd kernel of a forward-only operator: below autograd without a gradient, `NoBackward` with one."""
    overload = getattr(torch.ops.autotune, name).default
    below, redispatch = torch._C._after_autograd_keyset, overload.redispatch

    def refuse(keyset: Any, *args: Any) -> Any:
        raise NoBackward(f"autotune.{name} has no backward, and an input needs a gradient: {FORWARD_ONLY[name]}")

    def kernel(keyset: Any, *args: Any) -> Any:
        if torch._C.is_grad_enabled() and torch._C._any_requires_grad(*args):
            refuse(keyset, *args)
        with torch._C._AutoDispatchBelowAutograd():
            return redispatch(keyset & below, *args)

    if not native.register_autograd(name, inputs, refuse):
        _LIBRARY.impl(name, kernel, "Autograd", with_keyset=True)


def register_autograd() -> list[str]:
    """Attach the backward of every registered operator that has one (and whose backward operator, `NEEDS`, is
    registered too)."""
    done = []
    for kernel, (backward, setup) in BACKWARDS.items():
        info = OPS.get(kernel)
        if info is None or any(need not in OPS for need in NEEDS.get(kernel, ())):
            continue
        if not _fast_autograd(info.name, len(info.inputs), backward, setup):
            torch.library.register_autograd(info.qualname, backward, setup_context=setup, lib=_LIBRARY)
        done.append(kernel)
    for kernel in FORWARD_ONLY:
        if kernel in OPS:
            _refuse_gradients(OPS[kernel].name, len(OPS[kernel].inputs))
    return done
