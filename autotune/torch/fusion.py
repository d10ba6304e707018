"""`patch`'s fusions: a Linear and what follows it become one module on one kernel's epilogue.

GELU (`fuse_gelu`): an nn.Linear with a bias followed by ``nn.GELU(approximate="tanh")`` becomes one `LinearGELU`,
the GELU's slot an ``nn.Identity`` (parameters and state_dict keys unchanged), where the pair is consecutive in an
``nn.Sequential`` or where a module's own forward, traced by torch.fx with its children as leaves, feeds the
Linear's output to the GELU alone (nanoGPT's and timm's MLPs). A GELU called as a function is not a module, and
stays torch's.

SwiGLU (`fuse_swiglu`): a module whose forward computes ``silu(gate) * up`` from the two halves of one Linear
(``gate, up = self.gate_up(x).chunk(2, dim=-1)``, Llama's MLP with its gate and up projections in one weight) gets
that Linear replaced by a `LinearSwiGLU` (the same Parameter, under the same name: state_dict keys unchanged) and
its forward replaced by the same forward with the chunk, the silu and the product taken out. The rewritten graph's
code becomes the module's ``forward``, bound to the module itself, so that it calls the module's children as they
are when it runs (those `patch` swaps after this pass too). A trace fixes whatever Python decided while it ran, so
only forwards that take one tensor and nothing else, and trace to the same code in train and eval mode, are
rewritten: an optional argument (``if mask is not None``) or a mode switch (dropout's ``training=self.training``)
would otherwise be frozen at patch time. Attributes the forward reads as flags are frozen likewise; MLP modules
have none. What fx cannot follow (control flow on values), a Linear with a bias, used elsewhere in the forward,
held twice in the model or hooked, K not a multiple of 8 (TMA's strides), a silu or product whose result is used
twice: left as they are, and the report says why where there was a SwiGLU to fuse. A forward replaced this way is
fx's code: the module pickles only through its state_dict, as any traced module, and a shallow copy (`copy.copy`)
still calls the original's children (`copy.deepcopy` rebinds).

Every pass leaves a module with hooks alone: fused, they would see another tensor, or no longer run.
"""

from __future__ import annotations

import operator
from collections import Counter
from typing import TYPE_CHECKING, Callable

import torch
from torch import fx, nn

from autotune.torch.modules import Linear, LinearGELU, LinearSwiGLU
from autotune.torch.tracing import has_hooks, one_tensor_forward, replace_forward, trace_forward, unsafe_to_replace

if TYPE_CHECKING:
    from autotune.torch.patching import PatchReport


# --- GELU ---------------------------------------------------------------------------------------------------------
def _traced_pairs(module: nn.Module) -> list[tuple[str, str]] | str:
    """The (Linear, GELU) children of ``module`` whose forward feeds the Linear's output to the GELU alone, each
    called once (nanoGPT's and timm's MLPs); or why the forward could not be followed."""
    try:
        graph = trace_forward(module, module.training)
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
    if has_hooks(lin) or has_hooks(act):
        return "a hook on the Linear or the GELU would see another tensor once they are fused"
    return ""


def _fused(lin: nn.Linear, report: PatchReport) -> LinearGELU:
    fused = LinearGELU.__new__(LinearGELU)
    fused.__dict__.update(lin.__dict__)  # the same Parameter objects
    fused.fallbacks = report.fallbacks
    return fused


def fuse_gelu(model: nn.Module, report: PatchReport) -> set[int]:
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



# --- SwiGLU -------------------------------------------------------------------------------------------------------
_SILU = (nn.functional.silu, torch.nn.functional.silu)
_MUL = (operator.mul, torch.mul)


def _only_user(node: fx.Node) -> fx.Node | None:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _is_halves(node: fx.Node, source: fx.Node) -> bool:
    """``source.chunk(2, dim=-1)`` (or ``torch.chunk(source, 2, -1)``)."""
    if node.op == "call_method" and node.target == "chunk":
        args = list(node.args[1:]) + ([node.kwargs["dim"]] if "dim" in node.kwargs else [])
    elif node.op == "call_function" and node.target is torch.chunk:
        args = list(node.args[1:]) + ([node.kwargs["dim"]] if "dim" in node.kwargs else [])
    else:
        return False
    return node.args[0] is source and len(args) == 2 and args[0] == 2 and args[1] == -1


def _is_silu(node: fx.Node, module: nn.Module) -> bool:
    if node.op == "call_function" and node.target in _SILU:
        return len(node.args) == 1 and not node.kwargs.get("inplace", False)
    return node.op == "call_module" and type(module.get_submodule(node.target)) is nn.SiLU


def _swiglu_of(linear: fx.Node, module: nn.Module) -> tuple[fx.Node, list[fx.Node]] | None:
    """The product node of ``silu(gate) * up`` applied to ``linear``'s halves alone, and the nodes it replaces."""
    halves = _only_user(linear)
    if halves is None or not _is_halves(halves, linear) or len(halves.users) != 2:
        return None
    parts = {n.args[1]: n for n in halves.users
             if n.op == "call_function" and n.target is operator.getitem and type(n.args[1]) is int}  # fmt: skip
    if set(parts) != {0, 1}:
        return None
    gate, up = parts[0], parts[1]
    silu = _only_user(gate)
    if silu is None or not _is_silu(silu, module) or silu.args[0] is not gate:
        return None
    if silu.op == "call_module" and has_hooks(module.get_submodule(silu.target)):
        return None  # its hooks would no longer run
    product = _only_user(silu)
    if product is None or product.op != "call_function" or product.target not in _MUL or _only_user(up) is not product:
        return None
    if set(product.args) != {silu, up} or product.kwargs:
        return None
    return product, [product, silu, up, gate, halves]


def _fusable(module: nn.Module, name: str, held: Counter) -> str:
    """Why the Linear ``name`` of ``module`` stays as it is ("" where it can be fused)."""
    lin = module.get_submodule(name)
    if lin.bias is not None:
        return "the Linear has a bias (linear_swiglu takes none)"
    if lin.in_features % 8:
        return f"{lin.in_features} input features: linear_swiglu's TMA copies need a multiple of 8"
    if lin.out_features % 2:
        return f"{lin.out_features} output features do not split into gate and up halves"
    if held[id(lin)] > 1:
        return "the Linear is held elsewhere too: fused here, it would differ there"
    if has_hooks(lin):
        return "a hook on the Linear would see another tensor once it is fused"
    return ""


def fuse_swiglu(model: nn.Module, report: PatchReport) -> set[int]:
    """Each SwiGLU over one Linear's halves becomes one `LinearSwiGLU` (see the module); the ids of the modules
    put in, which `patch`'s swap pass then leaves alone."""
    made: set[int] = set()
    held = Counter(id(m) for _, m in model.named_modules(remove_duplicate=False))
    for name, parent in list(model.named_modules()):
        children = dict(parent.named_children())
        if isinstance(parent, nn.Sequential) or not any(
                type(m) in (nn.Linear, Linear) and m.bias is None for m in children.values()):  # fmt: skip
            continue
        if not one_tensor_forward(parent):
            continue
        try:
            graph = trace_forward(parent, parent.training)
            other = trace_forward(parent, not parent.training)
        except Exception:  # noqa: BLE001 — control flow on values: fx cannot follow it, nothing to fuse here
            continue
        try:
            made |= _rewrite(name, parent, graph, other, held, report)
        except Exception as exc:  # noqa: BLE001 — a graph fx made but cannot rebuild: the module stays as it was
            report.skipped.append((name or type(parent).__name__, f"its SwiGLU could not be fused "
                                   f"({type(exc).__name__}: {exc}); the Linear layers are swapped alone"))
    return made


def _rewrite(name: str, parent: nn.Module, graph: fx.Graph, other: fx.Graph, held: Counter,
             report: PatchReport) -> set[int]:  # fmt: skip
    """Fuse the SwiGLUs of ``parent``'s traced ``graph`` (``other``: traced in the other mode) and replace its
    forward; the modules put in."""
    children = dict(parent.named_children())
    calls = Counter(n.target for n in graph.nodes if n.op == "call_module")
    matches = []
    for node in graph.nodes:
        if node.op != "call_module" or "." in node.target or calls[node.target] != 1:
            continue
        if type(children.get(node.target)) not in (nn.Linear, Linear) or len(node.args) != 1 or node.kwargs:
            continue
        match = _swiglu_of(node, parent)
        if match is not None:
            matches.append((node, match))
    if not matches:
        return set()
    unsafe = unsafe_to_replace(parent, graph, other)
    if unsafe:
        report.skipped.append((name or type(parent).__name__, f"{unsafe}; the Linear layers are swapped alone"))
        return set()
    fused_here = []
    for node, (product, gone) in matches:
        why = _fusable(parent, node.target, held)
        if why:
            report.skipped.append((f"{name}.{node.target}" if name else node.target, f"{why}; swapped alone"))
            continue
        product.replace_all_uses_with(node)  # the Linear's node now stands for the fused module's output
        for dead in gone:
            graph.erase_node(dead)
        fused_here.append(node.target)
    if not fused_here:
        return set()
    replace_forward(parent, graph)  # calls the children by name: those swapped below when it runs
    made = set()
    for target in fused_here:
        lin = parent.get_submodule(target)
        fused = LinearSwiGLU.__new__(LinearSwiGLU)
        fused.__dict__.update(lin.__dict__)  # the same Parameter objects
        fused.fallbacks = report.fallbacks
        setattr(parent, target, fused)
        made.add(id(fused))
        report.swapped.append(f"{name + '.' if name else ''}{target} (Linear and SwiGLU, fused)")
    return made
