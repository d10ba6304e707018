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


def trace_forward(module: nn.Module, training: bool) -> fx.Graph:
    """``module``'s own forward traced in train (``training``) or eval mode."""
    shallow = copy.copy(module)  # what the forward sets on self while traced (a Proxy) stays off the model
    shallow.training = training
    return ChildrenAsLeaves().trace(shallow)


def has_attr(module: nn.Module, target: str) -> bool:
    """Whether ``module`` holds the attribute path ``target`` (fx keeps constants it made on its own module)."""
    for part in target.split("."):
        if not hasattr(module, part):
            return False
        module = getattr(module, part)
    return True
