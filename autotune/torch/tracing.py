"""What `patch`'s rewrites of a module's forward share (`autotune.torch.fusion`, `autotune.torch.attention`): tracing
one module's own forward with torch.fx, its children as leaves, and the checks that make a trace safe to run in the
forward's place.

A trace fixes whatever Python decided while it ran, so a rewrite takes only forwards of one tensor and nothing else
(`one_tensor_forward`) that trace to the same code in train and eval mode (`trace_forward` in both): an optional
argument (``if mask is not None``) or a mode switch (dropout's ``training=self.training``) would otherwise be frozen
at patch time.
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
