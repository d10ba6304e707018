"""`patch`: swap a model's torch.nn.LayerNorm / RMSNorm / Linear for autotune's drop-in modules
(`autotune.torch.modules`), fusing a Linear with the GELU or SwiGLU after it (`autotune.torch.fusion`), with
``attention`` its forwards' scaled_dot_product_attention calls too (`autotune.torch.attention`), and report what was
swapped, what was kept and why.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from torch import nn

from autotune.spaces.layernorm import EPS as LAYERNORM_EPS
from autotune.spaces.rmsnorm import EPS as RMSNORM_EPS
from autotune.torch.attention import patch_attention
from autotune.torch.fusion import fuse_gelu, fuse_swiglu
from autotune.torch.modules import LayerNorm, Linear, RMSNorm


@dataclass
class PatchReport:
    """What `patch` did: the swapped modules' names, the others of a swappable kind with why not, and calls of
    swapped Linear layers (``fallbacks``) and of patched attention (``attention_fallbacks``) that ran torch's at run
    time, by reason (device and dtypes, an empty input, an argument the kernels do not take, the first line of an
    error the kernel path raised)."""

    swapped: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    fallbacks: Counter = field(default_factory=Counter)
    attention_fallbacks: Counter = field(default_factory=Counter)

    def __str__(self) -> str:
        lines = [f"swapped {len(self.swapped)} modules"]
        lines += [f"  kept {name}: {why}" for name, why in self.skipped]
        lines += [f"  {count} calls ran torch's Linear: {why}" for why, count in self.fallbacks.items()]
        lines += [f"  {count} calls ran torch's scaled_dot_product_attention: {why}"
                  for why, count in self.attention_fallbacks.items()]  # fmt: skip
        return "\n".join(lines)


def _replacement(module: nn.Module, linear: bool) -> tuple[nn.Module | None, str]:
    """The autotune module equivalent to ``module`` sharing its parameters, or None and why not."""
    if isinstance(module, (LayerNorm, RMSNorm, Linear)):
        return None, "already autotune's"
    if isinstance(module, nn.Linear):
        if not linear:
            return None, ""
        if type(module) is not nn.Linear:  # e.g. MultiheadAttention's out_proj, which it calls by its weight
            return None, f"a subclass of nn.Linear ({type(module).__name__}) whose use may bypass its forward"
        new: nn.Module = Linear.__new__(Linear)
        new.__dict__.update(module.__dict__)
        return new, ""
    if isinstance(module, nn.LayerNorm):
        if not math.isclose(module.eps, LAYERNORM_EPS, rel_tol=1e-6):
            return None, f"eps={module.eps} (the kernel's is {LAYERNORM_EPS})"
        new = LayerNorm.__new__(LayerNorm)
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


def _children(parent: nn.Module) -> list[tuple[str, nn.Module]]:
    """The immediate submodules under every name they have (`named_children` lists an alias once)."""
    return [(name, m) for name, m in parent.named_modules(remove_duplicate=False) if name and "." not in name]


def patch(model: nn.Module, *, linear: bool = True, attention: bool = False) -> PatchReport:
    """Swap, in place, every torch.nn.LayerNorm / RMSNorm (and, with ``linear``, every nn.Linear, fusing one followed
    by nn.GELU(approximate="tanh"), and one whose halves feed a SwiGLU, `autotune.torch.fusion`) of ``model`` that
    autotune's kernels can compute for the autotune module sharing its parameters; with ``attention``, the
    scaled_dot_product_attention calls of its modules' own forwards too (`autotune.torch.attention`; off by default
    until it is measured to pay in training). Returns what was swapped and what was kept, with why."""
    report = PatchReport()
    if _replacement(model, linear)[0] is not None:
        raise ValueError("autotune.torch.patch: model is itself a layer patch would swap: wrap it or construct "
                         "autotune.torch.LayerNorm / RMSNorm / Linear directly")  # fmt: skip
    # A module shared by several parents, or held under two names, gets one replacement everywhere: a model that
    # relies on module identity (hooks, FSDP wrapping, id-keyed maps) sees the same structure after the swap.
    made: dict[int, tuple[nn.Module | None, str]] = {}
    replacements: set[int] = set()
    if linear:
        replacements = fuse_gelu(model, report) | fuse_swiglu(model, report)
    if attention:
        replacements |= patch_attention(model, report)
    for parent_name, parent in list(model.named_modules(remove_duplicate=False)):
        for name, child in _children(parent):
            if id(child) in replacements:  # a shared parent seen again: its children are swapped already
                continue
            full = f"{parent_name}.{name}" if parent_name else name
            if id(child) not in made:
                made[id(child)] = _replacement(child, linear)
                new, _ = made[id(child)]
                if new is not None:
                    replacements.add(id(new))
                if isinstance(new, Linear):
                    new.fallbacks = report.fallbacks
            new, why = made[id(child)]
            if new is not None:
                setattr(parent, name, new)
                report.swapped.append(full)
            elif why:
                report.skipped.append((full, why))
    return report
