"""`patch`'s attention: the ``F.scaled_dot_product_attention`` calls of a model's forwards on autotune's attention
operators (``attention``, ``attention_causal``, and their backward kernels in training).

`ScaledDotProductAttention` is a module that computes what ``F.scaled_dot_product_attention`` computes, with the
same arguments. It runs our operators where they compute the same thing, and torch's SDPA elsewhere, counting each
such call in a `patch` report with the reason. Ours needs:
- CUDA tensors of one half-precision dtype (under autocast, autocast's), 4-D (batch, heads, seq, head_dim);
- a head_dim the kernels cover, and k and v of one shape;
- as many kv heads as query heads, or (``enable_gqa``) a number that divides them;
- no mask, no dropout, the default scale;
- ``is_causal`` only with as many queries as keys, where torch's top-left mask and ours (bottom-right) agree.

float32 stays torch's: our float32 attention has no backward, and its SIMT forward is slower than torch's.

`patch_attention` rewrites the modules whose own forward calls SDPA. The forward must take one tensor and trace to
the same code in train and eval mode (`autotune.torch.tracing`). Each such module gets a child, `autotune_attention`
(a `ScaledDotProductAttention`), and its forward is replaced by the traced code calling that child in place of SDPA.
A module whose forward calls SDPA but cannot be traced that way keeps torch's, and the report says why.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING, Any

import torch
from torch import fx, nn

from autotune.errors import AutotuneError
from autotune.spaces.attention import HEAD_DIMS
from autotune.torch import functional
from autotune.torch.modules import AUTOCAST_ELIGIBLE
from autotune.torch.tracing import (
    forward_function,
    one_tensor_forward,
    replace_forward,
    trace_forward,
    unsafe_to_replace,
)

if TYPE_CHECKING:
    from autotune.torch.patching import PatchReport

CHILD = "autotune_attention"  # the name of the module `patch_attention` adds
_SDPA = (nn.functional.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention)
_HALF = (torch.float16, torch.bfloat16)


def unsupported(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Any, dropout_p: float,
                is_causal: bool, scale: float | None, enable_gqa: bool) -> str:  # fmt: skip
    """Why our operators do not compute this SDPA call ("" where they do)."""
    if attn_mask is not None:
        return "an attention mask"
    if dropout_p:
        return f"dropout_p={dropout_p}"
    if not all(t.is_cuda or t.is_meta for t in (q, k, v)):
        return f"{', '.join(sorted({t.device.type for t in (q, k, v)}))} tensors"
    if q.dtype not in _HALF or k.dtype is not q.dtype or v.dtype is not q.dtype:
        return f"{q.dtype} q, {k.dtype} k, {v.dtype} v (the kernels train in float16 and bfloat16)"
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return "not 4-D (batch, heads, seq, head_dim)"
    b, h, sq, d = q.shape
    if d not in HEAD_DIMS or k.shape != v.shape or k.shape[0] != b or k.shape[3] != d:
        return f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
    if scale is not None and not math.isclose(scale, d**-0.5, rel_tol=1e-6):
        return f"scale={scale} (the kernels scale by 1/sqrt(head_dim))"
    hkv, skv = k.shape[1], k.shape[2]
    if h != hkv and not (enable_gqa and h % hkv == 0):
        return f"{h} query heads over {hkv} kv heads" + ("" if enable_gqa else " without enable_gqa")
    if is_causal and sq != skv:
        return f"is_causal with {sq} queries over {skv} keys (torch masks top-left, the kernels bottom-right)"
    if q.numel() == 0 or k.numel() == 0:
        return "an empty input"
    return ""


class ScaledDotProductAttention(nn.Module):
    """``F.scaled_dot_product_attention`` on autotune's attention operators where they compute the same thing, and
    torch's elsewhere (see the module)."""

    fallbacks: Counter | None = None  # set by `patch`: the report's count of calls that ran torch's

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: Any = None,
                dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                enable_gqa: bool = False) -> torch.Tensor:  # fmt: skip
        q, k, v = query, key, value
        if q.device.type == "cuda" and torch.is_autocast_enabled("cuda"):  # as autocast casts SDPA's inputs
            dtype = torch.get_autocast_dtype("cuda")
            q, k, v = (t.to(dtype) if t.dtype in AUTOCAST_ELIGIBLE else t for t in (q, k, v))
        why = unsupported(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)
        if not why:
            if torch.compiler.is_compiling():  # traced: checked above, nothing raises later
                return functional.attention(q, k, v, is_causal)
            try:
                return functional.attention(q, k, v, is_causal)
            except AutotuneError as exc:
                why = str(exc).splitlines()[0]
        if self.fallbacks is not None:
            self.fallbacks[why] += 1
        extra = {"enable_gqa": True} if enable_gqa else {}  # torch before 2.5 has no such argument
        return nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                                          is_causal=is_causal, scale=scale, **extra)  # fmt: skip


def _calls_sdpa(module: nn.Module) -> bool:
    """Whether ``module``'s own forward names scaled_dot_product_attention (as F.… or torch.nn.functional.…)."""
    if isinstance(module, ScaledDotProductAttention):
        return False
    code = getattr(forward_function(module), "__code__", None)
    return code is not None and "scaled_dot_product_attention" in code.co_names


def patch_attention(model: nn.Module, report: PatchReport) -> set[int]:
    """Each module whose own forward calls SDPA, traced alike in train and eval mode from one tensor, gets its calls
    on a `ScaledDotProductAttention` child (see the module); the ids of the modules put in."""
    made: set[int] = set()
    for name, parent in list(model.named_modules()):
        if not _calls_sdpa(parent):
            continue
        where = name or type(parent).__name__
        if not one_tensor_forward(parent):
            report.skipped.append((where, "its forward does not take exactly one tensor (a trace would freeze what "
                                   "else it takes): its scaled_dot_product_attention stays torch's"))  # fmt: skip
            continue
        if hasattr(parent, CHILD):
            report.skipped.append((where, f"it has an attribute {CHILD!r} already"))
            continue
        try:
            graph = trace_forward(parent, parent.training)
            other = trace_forward(parent, not parent.training)
        except Exception as exc:  # noqa: BLE001 — control flow on values: fx cannot follow it
            report.skipped.append((where, f"its forward could not be traced ({type(exc).__name__}): its "
                                          f"scaled_dot_product_attention stays torch's"))  # fmt: skip
            continue
        why = _rewrite(parent, graph, other, report)
        if why:
            report.skipped.append((where, f"{why}: its scaled_dot_product_attention stays torch's"))
            continue
        made.add(id(getattr(parent, CHILD)))
        report.swapped.append(f"{name + '.' if name else ''}{CHILD} (scaled_dot_product_attention)")
    return made


def _rewrite(parent: nn.Module, graph: fx.Graph, other: fx.Graph, report: PatchReport) -> str:
    """Call a new `ScaledDotProductAttention` child in place of each SDPA node of ``parent``'s traced ``graph``
    (``other``: traced in the other mode) and replace its forward; "" when done, else why not."""
    calls = [n for n in graph.nodes if n.op == "call_function" and n.target in _SDPA]
    if not calls:
        return "its trace calls no scaled_dot_product_attention"
    unsafe = unsafe_to_replace(parent, graph, other)
    if unsafe:
        return unsafe
    child = ScaledDotProductAttention()
    child.fallbacks = report.attention_fallbacks
    for node in calls:
        with graph.inserting_before(node):
            replacement = graph.call_module(CHILD, node.args, dict(node.kwargs))
        node.replace_all_uses_with(replacement)
        graph.erase_node(node)
    parent.add_module(CHILD, child)  # before the rebuild, which looks the child up
    try:
        replace_forward(parent, graph)
    except Exception as exc:  # noqa: BLE001 — a graph fx made but cannot rebuild: the module stays as it was
        delattr(parent, CHILD)
        return f"its traced forward could not be rebuilt ({type(exc).__name__}: {exc})"
    return ""
