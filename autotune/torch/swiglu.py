"""`patch`'s SwiGLU fusion: a module whose forward computes ``silu(gate) * up`` from the two halves of one Linear
(``gate, up = self.gate_up(x).chunk(2, dim=-1)``, Llama's MLP with its gate and up projections in one weight) gets
that Linear replaced by a `LinearSwiGLU` (the same Parameter, under the same name: state_dict keys unchanged) and
its forward replaced by the same forward with the chunk, the silu and the product taken out.

The forward is followed by torch.fx with the module's children as leaves (`_ChildrenAsLeaves`): the pattern is
matched on that graph, and the rewritten graph's code becomes the module's ``forward``, bound to the module itself,
so that it calls the module's children as they are when it runs (those `patch` swaps after this pass too). A trace
fixes whatever Python decided while it ran, so only forwards that take one tensor and nothing else, and trace to the
same code in train and eval mode, are rewritten: an optional argument (``if mask is not None``) or a mode switch
(dropout's ``training=self.training``) would otherwise be frozen at patch time. Attributes the forward reads as
flags are frozen likewise; MLP modules have none. What fx cannot follow (control flow on values), a Linear with a
bias, used elsewhere in the forward, held twice in the model or hooked, K not a multiple of 8 (TMA's strides), a
silu or product whose result is used twice: left as they are, and the report says why where there was a SwiGLU to
fuse. A forward replaced this way is fx's code: the module pickles only through its state_dict, as any traced
module, and a shallow copy (`copy.copy`) still calls the original's children (`copy.deepcopy` rebinds).
"""

from __future__ import annotations

import copy
import inspect
import operator
import types
from collections import Counter

import torch
from torch import fx, nn

from autotune.torch.modules import Linear, LinearSwiGLU, PatchReport, _ChildrenAsLeaves, _has_hooks

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
    if silu.op == "call_module" and _has_hooks(module.get_submodule(silu.target)):
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
    if _has_hooks(lin):
        return "a hook on the Linear would see another tensor once it is fused"
    return ""


def _one_tensor_forward(module: nn.Module) -> bool:
    """Whether ``module.forward`` takes exactly one argument, with no default (see the module)."""
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return False
    return len(params) == 1 and params[0].default is inspect.Parameter.empty and params[0].kind in (
        inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)  # fmt: skip


def _trace(module: nn.Module, training: bool) -> fx.Graph:
    shallow = copy.copy(module)  # what the forward sets on self while traced (a Proxy) stays off the model
    shallow.training = training
    return _ChildrenAsLeaves().trace(shallow)


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
        if not _one_tensor_forward(parent):
            continue
        try:
            graph = _trace(parent, parent.training)
            other = _trace(parent, not parent.training)
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
    where = name or type(parent).__name__
    if graph.python_code("self").src != other.python_code("self").src:
        report.skipped.append((where, "its forward differs between train and eval mode (a trace would freeze "
                               "one); the Linear layers are swapped alone"))  # fmt: skip
        return set()
    if any(n.op == "get_attr" and not _has_attr(parent, n.target) for n in graph.nodes):
        report.skipped.append((where, "its trace holds constants of its own; the Linear layers are swapped alone"))
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
    graph.lint()
    code = fx.GraphModule(parent, graph)
    made = set()
    for target in fused_here:
        lin = parent.get_submodule(target)
        fused = LinearSwiGLU.__new__(LinearSwiGLU)
        fused.__dict__.update(lin.__dict__)  # the same Parameter objects
        fused.fallbacks = report.fallbacks
        setattr(parent, target, fused)
        made.add(id(fused))
        report.swapped.append(f"{name + '.' if name else ''}{target} (Linear and SwiGLU, fused)")
    # The traced code bound to the module itself: it calls the children the module holds when it runs.
    parent.forward = types.MethodType(type(code).forward, parent)
    return made


def _has_attr(module: nn.Module, target: str) -> bool:
    """Whether ``module`` holds the attribute path ``target`` (fx keeps constants it made on its own module)."""
    for part in target.split("."):
        if not hasattr(module, part):
            return False
        module = getattr(module, part)
    return True
