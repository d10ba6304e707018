"""Drop-in modules and `patch`, which swaps them into a model.

`LayerNorm` and `RMSNorm` subclass torch's own (same parameters, same state_dict) and run autotune's kernels on
CUDA tensors of a dtype their family supports, and on meta/fake tensors (torch.compile tracing, recording shapes
without a GPU). Elsewhere — CPU tensors, dtypes no kernel covers — they run torch's implementation: a module never
fails where the one it replaces works. The kernels' eps is compiled in (LayerNorm 1e-5, RMSNorm 1e-6), so a
module asking for another eps is refused at construction, and `patch` leaves such modules alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from autotune.runtime.arrays import dtype_name
from autotune.spaces import space_class
from autotune.spaces.layernorm import EPS as LAYERNORM_EPS
from autotune.spaces.rmsnorm import EPS as RMSNORM_EPS
from autotune.torch import functional

# Constant tables, so that torch.compile traces `_kernel_takes` without a graph break: a lookup in
# autotune.runtime.arrays' shared dtype memo broke the graph on the H100 ("Dynamo cannot determine whether the
# underlying object is hashable") after other code had filled the memo.
_DTYPE_NAMES = {d: dtype_name(d) for d in (torch.float32, torch.float16, torch.bfloat16)}
_TAKES = {k: frozenset(space_class(k).supported_dtypes()) for k in ("layernorm", "layernorm_backward", "rmsnorm")}


def _kernel_takes(kernel: str, x: torch.Tensor) -> bool:
    return x.device.type in ("cuda", "meta") and _DTYPE_NAMES.get(x.dtype) in _TAKES[kernel]


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


@dataclass
class PatchReport:
    """What `patch` did: the swapped modules' names, and the others of a swappable kind with why not."""

    swapped: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"swapped {len(self.swapped)} modules"]
        lines += [f"  kept {name}: {why}" for name, why in self.skipped]
        return "\n".join(lines)


def _replacement(module: nn.Module) -> tuple[nn.Module | None, str]:
    """The autotune module equivalent to ``module`` sharing its parameters, or None and why not."""
    if isinstance(module, (LayerNorm, RMSNorm)):
        return None, "already autotune's"
    if isinstance(module, nn.LayerNorm):
        if not math.isclose(module.eps, LAYERNORM_EPS, rel_tol=1e-6):
            return None, f"eps={module.eps} (the kernel's is {LAYERNORM_EPS})"
        new: nn.Module = LayerNorm.__new__(LayerNorm)
    elif isinstance(module, nn.RMSNorm):
        if module.eps is None or not math.isclose(module.eps, RMSNORM_EPS, rel_tol=1e-6):
            return None, f"eps={module.eps} (the kernel's is {RMSNORM_EPS})"
        if len(module.normalized_shape) != 1:
            return None, "normalises more than the last dim"
        new = RMSNorm.__new__(RMSNorm)
    else:
        return None, ""
    new.__dict__.update(module.__dict__)  # the same Parameter objects: optimizers and hooks keep working
    return new, ""


def patch(model: nn.Module) -> PatchReport:
    """Swap, in place, every torch.nn.LayerNorm / RMSNorm of ``model`` that autotune's kernels can compute for
    the autotune module sharing its parameters; returns what was swapped and what was kept, with why."""
    report = PatchReport()
    if _replacement(model)[0] is not None:
        raise ValueError("autotune.torch.patch: model is itself a norm layer: wrap it or construct "
                         "autotune.torch.LayerNorm / RMSNorm directly")  # fmt: skip
    for parent_name, parent in list(model.named_modules()):
        for name, child in list(parent.named_children()):
            full = f"{parent_name}.{name}" if parent_name else name
            new, why = _replacement(child)
            if new is not None:
                setattr(parent, name, new)
                report.swapped.append(full)
            elif why:
                report.skipped.append((full, why))
    return report
