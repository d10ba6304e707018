"""Drop-in modules: torch's LayerNorm, RMSNorm and Linear on autotune's kernels (`autotune.torch.patching.patch`
swaps them into a model, `autotune.torch.fusion` fuses a Linear with what follows it).

`Linear` subclasses torch.nn.Linear and runs ``linear`` (or ``gemm_nt`` without a bias) on CUDA tensors of a dtype
the GEMM families support (under autocast, in autocast's dtype, cast as autocast would), and torch's own elsewhere;
a `patch` report counts those run-time fallbacks with the reason.

`LinearGELU` is a Linear followed by ``nn.GELU(approximate="tanh")`` on ``linear_gelu`` (GELU in the GEMM's
epilogue; its backward's dGELU and bias sum in one pass); `LinearSwiGLU` a bias-less gate-and-up Linear followed by
Llama's SwiGLU on ``linear_swiglu``. `patch` makes them where a model computes those (`autotune.torch.fusion`).

`LayerNorm` and `RMSNorm` subclass torch's own (same parameters, same state_dict) and run autotune's kernels on
CUDA tensors of a dtype their family supports, and on meta/fake tensors (torch.compile tracing, recording shapes
without a GPU). Elsewhere — CPU tensors, dtypes no kernel covers — they run torch's implementation: a module never
fails where the one it replaces works. The kernels' eps is compiled in (LayerNorm 1e-5, RMSNorm 1e-6), so a
module asking for another eps is refused at construction, and `patch` leaves such modules alone.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import torch
from torch import nn

from autotune.errors import AutotuneError
from autotune.runtime.arrays import dtype_name
from autotune.spaces import space_class
from autotune.spaces.layernorm import EPS as LAYERNORM_EPS
from autotune.spaces.rmsnorm import EPS as RMSNORM_EPS
from autotune.torch import functional

# Constant tables, so that torch.compile traces `_kernel_takes` without a graph break: a lookup in
# autotune.runtime.arrays' shared dtype memo broke the graph on the H100 ("Dynamo cannot determine whether the
# underlying object is hashable") after other code had filled the memo.
_DTYPE_NAMES = {d: dtype_name(d) for d in (torch.float32, torch.float16, torch.bfloat16)}
_KERNELS = ("layernorm", "layernorm_backward", "rmsnorm", "linear", "linear_gelu", "linear_swiglu")
_TAKES = {k: frozenset(space_class(k).supported_dtypes()) for k in _KERNELS}


AUTOCAST_ELIGIBLE = (torch.float32, torch.float16, torch.bfloat16)  # autocast leaves float64 alone


def _kernel_takes(kernel: str, x: torch.Tensor) -> bool:
    return (x.is_cuda or x.is_meta) and _DTYPE_NAMES.get(x.dtype) in _TAKES[kernel]


def _check_eps(module: str, eps: float | None, kernel_eps: float) -> None:
    if eps is None or not math.isclose(eps, kernel_eps, rel_tol=1e-6):
        raise ValueError(f"autotune.torch.{module}: eps={eps}: the kernel computes with eps={kernel_eps}")


class LayerNorm(nn.LayerNorm):
    """torch.nn.LayerNorm on autotune's tuned forward and backward kernels (eps must be 1e-5)."""

    def __init__(self, normalized_shape: Any, eps: float = LAYERNORM_EPS, elementwise_affine: bool = True,
                 bias: bool = True, device: Any = None, dtype: Any = None) -> None:  # fmt: skip
        _check_eps("LayerNorm", eps, LAYERNORM_EPS)
        super().__init__(normalized_shape, eps, elementwise_affine, bias=bias, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Both directions or neither: a dtype with a forward kernel but no backward one trains through torch.
        if not (_kernel_takes("layernorm", x) and _kernel_takes("layernorm_backward", x)):
            return super().forward(x)
        cols = math.prod(self.normalized_shape)
        weight = self.weight if self.weight is not None else x.new_ones(cols)
        bias = self.bias if self.bias is not None else x.new_zeros(cols)
        return functional.layer_norm(x, self.normalized_shape, weight, bias)


class RMSNorm(nn.RMSNorm):
    """torch.nn.RMSNorm over the last dim on autotune's tuned kernel (eps must be 1e-6)."""

    def __init__(self, normalized_shape: Any, eps: float | None = RMSNORM_EPS, elementwise_affine: bool = True,
                 device: Any = None, dtype: Any = None) -> None:  # fmt: skip
        _check_eps("RMSNorm", eps, RMSNORM_EPS)
        super().__init__(normalized_shape, eps, elementwise_affine, device=device, dtype=dtype)
        if len(self.normalized_shape) != 1:
            raise ValueError(f"autotune.torch.RMSNorm: normalized_shape={tuple(self.normalized_shape)}: the kernel "
                             f"normalises the last dim only")  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not _kernel_takes("rmsnorm", x):
            return super().forward(x)
        weight = self.weight if self.weight is not None else x.new_ones(self.normalized_shape[0])
        return functional.rms_norm(x, weight)


class Linear(nn.Linear):
    """torch.nn.Linear on autotune's tuned GEMMs (forward ``linear`` / ``gemm_nt``; backward ``gemm`` and
    ``gemm_tn``, no operand copied)."""

    fallbacks: Counter | None = None  # set by `patch`: the report's count of calls that ran torch's

    KERNEL = "linear"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight, bias = self.weight, self.bias
        if x.device.type == "cuda" and x.dtype in AUTOCAST_ELIGIBLE and torch.is_autocast_enabled("cuda"):
            dtype = torch.get_autocast_dtype("cuda")  # what autocast would cast F.linear's operands to
            x, weight = x.to(dtype), weight.to(dtype)
            bias = bias.to(dtype) if bias is not None else None
        if not (_kernel_takes(self.KERNEL, x) and weight.dtype is x.dtype and x.device == weight.device):
            return self._torchs(x, weight, bias, f"{x.device.type} {x.dtype} input, {weight.dtype} weight")
        if x.numel() == 0:  # an empty batch (an expert without tokens): the kernels take no empty matrix
            return self._torchs(x, weight, bias, "an empty input")
        if torch.compiler.is_compiling():  # traced: shapes and dtypes were checked above, nothing raises later
            return self._kernels(x, weight, bias)
        try:
            return self._kernels(x, weight, bias)
        except AutotuneError as exc:  # e.g. a view at an address TMA cannot read, a shape no algorithm fits
            return self._torchs(x, weight, bias, str(exc).splitlines()[0])

    def _kernels(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return functional.linear(x, weight, bias)

    def _torchs(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, why: str) -> torch.Tensor:
        if self.fallbacks is not None:
            self.fallbacks[why] += 1
        return nn.functional.linear(x, weight, bias)


class LinearGELU(Linear):
    """torch.nn.Linear followed by GELU's tanh form (``nn.GELU(approximate="tanh")``), on ``linear_gelu``: GELU in the
    GEMM's epilogue, its backward's dGELU and bias sum in one pass. Needs a bias (`patch` fuses only such pairs)."""

    KERNEL = "linear_gelu"

    def _kernels(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        if bias is None:  # linear_gelu adds a bias; `patch` fuses only Linear layers that have one
            return self._torchs(x, weight, bias, "no bias (linear_gelu takes one)")
        return functional.linear_gelu(x, weight, bias)

    def _torchs(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, why: str) -> torch.Tensor:
        return nn.functional.gelu(super()._torchs(x, weight, bias, why), approximate="tanh")


# Whether linear_swiglu's algorithms run on a device (its compute capability), by device index: asked on the device's
# first eager call; while torch.compile traces for a device not seen yet, the Linear's kernels and torch's silu run.
_SWIGLU_DEVICES: dict[int, bool] = {}


def _swiglu_runs_on(x: torch.Tensor) -> bool:
    if x.is_meta:
        return True
    index = x.get_device()
    runs = _SWIGLU_DEVICES.get(index)
    if runs is None:
        if torch.compiler.is_compiling():
            return False
        cc = torch.cuda.get_device_capability(index)
        runs = _SWIGLU_DEVICES[index] = any(tuple(a.min_cc) <= cc <= tuple(a.max_cc or cc)
                                            for a in space_class("linear_swiglu").algorithms)  # fmt: skip
    return runs


class LinearSwiGLU(Linear):
    """A gate-and-up projection without bias (nn.Linear to 2·hidden features, the gate rows first) followed by
    Llama's SwiGLU, ``silu(gate) * up`` of its output's two halves: hidden features out. Where no gradient is
    needed, one ``linear_swiglu`` kernel (the activation in the GEMM's epilogue), where it runs (in_features a
    multiple of 8, a GPU of its compute capability); elsewhere, and in training, the Linear's kernels, then torch's
    silu and product (the operator has no backward yet). `patch` puts one in place of such a
    Linear where the parent's traced forward applies the SwiGLU to it alone (`autotune.torch.fusion`)."""

    KERNEL = "linear"  # the dtypes of the path through the Linear's kernels; the fused kernel's: `_kernels`

    def _kernels(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        training = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)
        if (bias is None and not training and _DTYPE_NAMES.get(x.dtype) in _TAKES["linear_swiglu"]
                and x.shape[-1] % 8 == 0 and _swiglu_runs_on(x)):  # fmt: skip
            return functional.linear_swiglu(x, weight)
        gate, up = functional.linear(x, weight, bias).chunk(2, dim=-1)
        return nn.functional.silu(gate) * up

    def _torchs(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, why: str) -> torch.Tensor:
        gate, up = super()._torchs(x, weight, bias, why).chunk(2, dim=-1)
        return nn.functional.silu(gate) * up
