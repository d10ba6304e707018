"""What `patch`'s rewrites of a module's forward share (`autotune.torch.fusion`, `autotune.torch.attention`): tracing
one module's own forward with torch.fx, its children as leaves, and the checks that make a trace safe to run in the
forward's place.

A trace fixes whatever Python decided while it ran, so a rewrite takes only forwards of one tensor and nothing else
(`one_tensor_forward`) that trace to the same code in train and eval mode (`trace_forward` in both, compared by
`same_code`): an optional argument (``if mask is not None``) or a mode switch (dropout's ``training=self.training``)
would otherwise be frozen at patch time. Constants compare by value: nanoGPT's ``dropout_p=self.dropout if
self.training else 0`` with a dropout of 0.0 traces ``0.0`` in one mode and ``0`` in the other, the same call.
"""

from __future__ import annotations

import copy
import inspect
import types
from typing import Any

from torch import fx, nn

# nn.Module's hook tables (private attributes, torch 2.x; tests/test_torch_fusion.py pins them): a hook on a module
# that a rewrite fuses or replaces would see another tensor, or no longer run, so such modules are left alone. No
# public API tells whether a module has hooks.
HOOK_TABLES = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def has_hooks(module: nn.Module) -> bool:
    return any(getattr(module, table, None) for table in HOOK_TABLES)


class ChildrenAsLeaves(fx.Tracer):
    """Traces one module's own forward: every submodule it calls is a single call_module node."""

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return True


def one_tensor_forward(module: nn.Module) -> bool:
    """Whether ``module.forward`` takes exactly one argument, with no default."""
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return False
    return len(params) == 1 and params[0].default is inspect.Parameter.empty and params[0].kind in (
        inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)  # fmt: skip


def forward_function(module: nn.Module) -> Any:
    """The function ``module`` runs as its forward: a rewrite's, set on the instance, else its class's."""
    own = module.__dict__.get("forward")
    return own.__func__ if isinstance(own, types.MethodType) else type(module).forward


def trace_forward(module: nn.Module, training: bool) -> fx.Graph:
    """``module``'s own forward traced in train (``training``) or eval mode. fx traces a module's class forward; a
    forward an earlier rewrite set on the instance is traced instead, so that a second rewrite builds on the first
    rather than undoing it."""
    shallow = copy.copy(module)  # what the forward sets on self while traced (a Proxy) stays off the model
    shallow.training = training
    if "forward" in module.__dict__:
        shallow.__dict__.pop("forward", None)
        shallow.__class__ = type(type(module).__name__, (type(module),), {"forward": forward_function(module)})
    return ChildrenAsLeaves().trace(shallow)


def has_attr(module: nn.Module, target: str) -> bool:
    """Whether ``module`` holds the attribute path ``target`` (fx keeps constants it made on its own module)."""
    for part in target.split("."):
        if not hasattr(module, part):
            return False
        module = getattr(module, part)
    return True


def same_code(a: fx.Graph, b: fx.Graph) -> bool:
    """Whether two traces compute alike: the same nodes in the same order, with equal targets and arguments, the
    constants among them compared by value."""
    nodes_a, nodes_b = list(a.nodes), list(b.nodes)
    if len(nodes_a) != len(nodes_b):
        return False
    index: dict[fx.Node, int] = {}
    for i, (x, y) in enumerate(zip(nodes_a, nodes_b)):
        if x.op != y.op or x.target != y.target:
            return False
        if not (_same_argument(x.args, y.args, index) and _same_argument(x.kwargs, y.kwargs, index)):
            return False
        index[x] = index[y] = i
    return True


def _same_argument(p: Any, q: Any, index: dict[fx.Node, int]) -> bool:
    if isinstance(p, fx.Node) or isinstance(q, fx.Node):  # the same earlier node of each trace
        return isinstance(p, fx.Node) and isinstance(q, fx.Node) and p in index and index[p] == index.get(q)
    if isinstance(p, (tuple, list)):
        return type(p) is type(q) and len(p) == len(q) and all(_same_argument(x, y, index) for x, y in zip(p, q))
    if isinstance(p, dict):
        return isinstance(q, dict) and p.keys() == q.keys() and all(_same_argument(p[k], q[k], index) for k in p)
    numbers = (int, float)
    if isinstance(p, numbers) and isinstance(q, numbers) and not isinstance(p, bool) and not isinstance(q, bool):
        return p == q  # 0 and 0.0: one value
    try:
        return type(p) is type(q) and bool(p == q)
    except Exception:  # noqa: BLE001 — values without a plain equality (tensors): not known to be the same
        return False


def unsafe_to_replace(module: nn.Module, graph: fx.Graph, other: fx.Graph) -> str:
    """Why ``graph`` (``module``'s forward traced; ``other``: traced in the other mode) may not run in the forward's
    place ("" where it may)."""
    if not same_code(graph, other):
        return "its forward differs between train and eval mode (a trace would freeze one)"
    if any(n.op == "get_attr" and not has_attr(module, n.target) for n in graph.nodes):
        return "its trace holds constants of its own"
    return ""


def replace_forward(module: nn.Module, graph: fx.Graph) -> None:
    """Run ``graph`` as ``module``'s forward: fx's code bound to the module itself, so that it calls the children
    the module holds when it runs. Raises what fx raises where it cannot rebuild the graph, the forward unchanged."""
    graph.lint()
    code = fx.GraphModule(module, graph)
    module.forward = types.MethodType(type(code).forward, module)
