"""Drop-in modules and `patch`, which swaps them into a model.

`Linear` subclasses torch.nn.Linear and runs ``linear`` (or ``gemm_nt`` without a bias) on CUDA tensors of a dtype
the GEMM families support (under autocast, in autocast's dtype, cast as autocast would), and torch's own elsewhere;
a `patch` report counts those run-time fallbacks with the reason.

`LinearGELU` is a Linear followed by ``nn.GELU(approximate="tanh")`` on ``linear_gelu`` (GELU in the GEMM's
epilogue; its backward's dGELU and bias sum in one pass): `patch` makes one from each such pair, leaving
``nn.Identity`` in the GELU's place (parameters and state_dict keys unchanged), where the pair is consecutive in an
``nn.Sequential`` or where a module's own forward, traced by torch.fx with its children as leaves, feeds the
Linear's output to the GELU alone (nanoGPT's and timm's MLPs). A GELU called as a function is not a module, and
stays torch's.

`LayerNorm` and `RMSNorm` subclass torch's own (same parameters, same state_dict) and run autotune's kernels on
CUDA tensors of a dtype their family supports, and on meta/fake tensors (torch.compile tracing, recording shapes
without a GPU). Elsewhere — CPU tensors, dtypes no kernel covers — they run torch's implementation: a module never
fails where the one it replaces works. The kernels' eps is compiled in (LayerNorm 1e-5, RMSNorm 1e-6), so a
module asking for another eps is refused at construction, and `patch` leaves such modules alone.
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import fx, nn

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


_AUTOCAST_ELIGIBLE = (torch.float32, torch.float16, torch.bfloat16)  # autocast leaves float64 alone


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
        if x.device.type == "cuda" and x.dtype in _AUTOCAST_ELIGIBLE and torch.is_autocast_enabled("cuda"):
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
    Linear where the parent's traced forward applies the SwiGLU to it alone (`autotune.torch.swiglu`)."""

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


@dataclass
class PatchReport:
    """What `patch` did: the swapped modules' names, the others of a swappable kind with why not, and calls of
    swapped Linear layers that ran torch's at run time, by reason (device and dtypes, an empty input, the first
    line of an error the kernel path raised)."""

    swapped: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    fallbacks: Counter = field(default_factory=Counter)

    def __str__(self) -> str:
        lines = [f"swapped {len(self.swapped)} modules"]
        lines += [f"  kept {name}: {why}" for name, why in self.skipped]
        lines += [f"  {count} calls ran torch's Linear: {why}" for why, count in self.fallbacks.items()]
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


# nn.Module's hook tables (private attributes, torch 2.x; tests/test_torch_linear.py pins them): a hook on the Linear
# would see GELU's output once fused, and the GELU's own hooks would vanish with it, so a pair with any is left alone.
# No public API tells whether a module has hooks.
_HOOK_TABLES = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def _has_hooks(module: nn.Module) -> bool:
    return any(getattr(module, table, None) for table in _HOOK_TABLES)


class _ChildrenAsLeaves(fx.Tracer):
    """Traces one module's own forward: every submodule it calls is a single call_module node."""

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return True


def _traced_pairs(module: nn.Module) -> list[tuple[str, str]] | str:
    """The (Linear, GELU) children of ``module`` whose forward feeds the Linear's output to the GELU alone, each
    called once (nanoGPT's and timm's MLPs); or why the forward could not be followed."""
    try:  # a shallow copy: what the forward sets on self while traced (a Proxy) stays off the model
        graph = _ChildrenAsLeaves().trace(copy.copy(module))
    except Exception as exc:  # noqa: BLE001 — control flow on values, asserted shapes: fx cannot follow them
        return f"its forward could not be traced ({type(exc).__name__}); the Linear layers are swapped alone"
    calls = Counter(n.target for n in graph.nodes if n.op == "call_module")
    pairs = []
    for node in graph.nodes:
        if node.op != "call_module" or type(module.get_submodule(node.target)) is not nn.GELU:
            continue
        source = node.args[0] if len(node.args) == 1 and not node.kwargs else None
        if not isinstance(source, fx.Node) or source.op != "call_module":
            continue
        if type(module.get_submodule(source.target)) is nn.Linear and len(source.users) == 1 and "." not in (
                source.target + node.target) and calls[source.target] == calls[node.target] == 1:  # fmt: skip
            pairs.append((source.target, node.target))
    return pairs


def _unfusable(lin: nn.Module, act: nn.Module, held: Counter) -> str:
    """Why a Linear → GELU pair stays as it is ("" where it can be fused)."""
    if lin.bias is None:
        return "the Linear has no bias (linear_gelu adds one)"
    if act.approximate != "tanh":
        return f"GELU(approximate={act.approximate!r}): linear_gelu computes the tanh form"
    if held[id(lin)] > 1 or held[id(act)] > 1:
        return "the Linear or the GELU is held elsewhere too: fused here, it would differ there"
    if _has_hooks(lin) or _has_hooks(act):
        return "a hook on the Linear or the GELU would see another tensor once they are fused"
    return ""


def _fused(lin: nn.Linear, report: PatchReport) -> LinearGELU:
    fused = LinearGELU.__new__(LinearGELU)
    fused.__dict__.update(lin.__dict__)  # the same Parameter objects
    fused.fallbacks = report.fallbacks
    return fused


def _fuse_gelu(model: nn.Module, report: PatchReport) -> set[int]:
    """Each nn.Linear followed by nn.GELU(approximate="tanh") becomes one `LinearGELU`, the GELU an nn.Identity:
    consecutive in an nn.Sequential, or, in another module, where its traced forward feeds the Linear's output to
    the GELU alone. Only plain torch classes, with a bias, each module held once in the model, and no hooks: what
    the pair computes, and who sees it, stay the same. The ids of the modules put in, which the swap pass then
    leaves alone."""
    made: set[int] = set()
    held = Counter(id(m) for _, m in model.named_modules(remove_duplicate=False))

    def fuse(parent_name: str, first: str, second: str, lin: nn.Module, act: nn.Module, put: Callable) -> None:
        where = f"{parent_name}.{second}" if parent_name else second
        why = _unfusable(lin, act, held)
        if why:
            report.skipped.append((where, f"{why}; the Linear before it is swapped alone"))
            return
        fused, identity = _fused(lin, report), nn.Identity()
        put(fused, identity)
        made.update((id(fused), id(identity)))
        prefix = f"{parent_name}." if parent_name else ""
        report.swapped.append(f"{prefix}{first}+{second} (Linear and GELU, fused)")

    for name, parent in list(model.named_modules()):
        if type(parent) is nn.Sequential:
            names = [n for n, _ in parent.named_children()]
            if len(names) != len(parent):  # a module held twice: positions and names part ways
                names = [str(i) for i in range(len(parent))]
            for i in range(len(parent) - 1):
                lin, act = parent[i], parent[i + 1]
                if type(lin) is nn.Linear and type(act) is nn.GELU:
                    fuse(name, names[i], names[i + 1], lin, act, _put_at(parent, i))
            continue
        if isinstance(parent, nn.Sequential):
            continue  # a subclass may call its children its own way
        children = dict(parent.named_children())
        if not any(type(m) is nn.Linear for m in children.values()) or not any(
                type(m) is nn.GELU for m in children.values()):  # fmt: skip
            continue
        pairs = _traced_pairs(parent)
        if isinstance(pairs, str):
            report.skipped.append((name or type(parent).__name__, pairs))
            continue
        for first, second in pairs:
            fuse(name, first, second, children[first], children[second], _put_as(parent, first, second))
    return made


def _put_at(seq: nn.Sequential, i: int) -> Callable[[nn.Module, nn.Module], None]:
    """Puts a fused pair at positions i and i + 1 of ``seq``."""

    def put(fused: nn.Module, identity: nn.Module) -> None:
        seq[i], seq[i + 1] = fused, identity

    return put


def _put_as(parent: nn.Module, first: str, second: str) -> Callable[[nn.Module, nn.Module], None]:
    """Puts a fused pair under the names ``first`` and ``second`` of ``parent``."""

    def put(fused: nn.Module, identity: nn.Module) -> None:
        setattr(parent, first, fused)
        setattr(parent, second, identity)

    return put


def patch(model: nn.Module, *, linear: bool = True) -> PatchReport:
    """Swap, in place, every torch.nn.LayerNorm / RMSNorm (and, with ``linear``, every nn.Linear, fusing one followed
    by nn.GELU(approximate="tanh"), and one whose halves feed a SwiGLU, `autotune.torch.swiglu`) of ``model`` that
    autotune's kernels can compute for the autotune module sharing its parameters; returns what was swapped and
    what was kept, with why."""
    report = PatchReport()
    if _replacement(model, linear)[0] is not None:
        raise ValueError("autotune.torch.patch: model is itself a layer patch would swap: wrap it or construct "
                         "autotune.torch.LayerNorm / RMSNorm / Linear directly")  # fmt: skip
    # A module shared by several parents, or held under two names, gets one replacement everywhere: a model that
    # relies on module identity (hooks, FSDP wrapping, id-keyed maps) sees the same structure after the swap.
    made: dict[int, tuple[nn.Module | None, str]] = {}
    replacements: set[int] = set()
    if linear:
        from autotune.torch.swiglu import fuse_swiglu  # it builds on this module's classes: imported here

        replacements = _fuse_gelu(model, report) | fuse_swiglu(model, report)
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
