"""How a space's configuration becomes running code: its template, its -D defines, its launch plan, its workspace.

One of the groups of hooks `KernelSpace` is made of (the compiler and the launch plan call these). A family
(a space with ``algorithms``) hands each to the algorithm of the configuration; a space of one kernel overrides
`launches` (and `defines`, `workspace` where the parameters are not the defines themselves).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from autotune.device import DeviceInfo
    from autotune.shape import Shape
    from autotune.spaces.base import BufferSpec, Config, Step


def locate_template(owner: type, template: str | Path) -> str | Path:
    """A relative template path names a file beside the module that defines ``owner`` where one exists there
    (a user's space keeps its template next to it), else a template of the library's kernel_templates/."""
    path = Path(template)
    if path.is_absolute():
        return path
    module_file = getattr(sys.modules.get(owner.__module__), "__file__", None)
    if module_file:
        beside = Path(module_file).resolve().parent / path
        if beside.is_file():
            return beside
    return template


class Rendering:
    """Templates, defines, launches and workspace of a `KernelSpace` (see the module)."""

    def template_for(self, config: Mapping[str, Any]) -> str | Path:
        """The template that computes ``config``."""
        if self.algorithms:
            algo = self.algorithm(config)
            return locate_template(type(algo), algo.template)
        return locate_template(type(self), self.template)

    def templates(self) -> list[str | Path]:
        """Every template this space (at its dtype) may compile."""
        if self.algorithms:
            return list(dict.fromkeys(locate_template(type(a), a.template) for a in self.algos.values()))
        return [locate_template(type(self), self.template)]

    def template_hash(self) -> str:
        """The fingerprint stored with results: they go stale when any template of this space (at its dtype)
        or a header it includes changes."""
        from autotune.templates import template_hash

        hashes = [template_hash(t) for t in self.templates()]
        if len(hashes) == 1:
            return hashes[0]
        return hashlib.sha256("".join(sorted(hashes)).encode()).hexdigest()

    def defines(self, config: Config) -> dict[str, int | str]:
        """The -D defines that render ``config`` (by default: the parameters themselves)."""
        if self.algorithms:
            return self.algorithm(config).defines(config)
        return dict(config)

    def tunable_names(self, config: Config) -> list[str]:
        """The defines in which configurations of ``config``'s algorithm differ: its tunables (not the dtype, the
        layout or the problem's constants). The compiler may build configurations that differ only in these in one
        nvcc front end (`autotune.runtime.compile_batch`)."""
        parameters = self.algorithm(config).parameters if self.algorithms else self.parameters
        names = {p.name for p in parameters}
        return [name for name in self.defines(config) if name in names]

    def problem_defines(self, shape: Shape) -> dict[str, int | str]:
        """Compile-time constants the problem fixes, beside the configuration's (e.g. attention's head_dim,
        which sizes register arrays). A configuration compiled for one value is never run at another."""
        return {}

    def compile_defines(self, config: Config, shape: Shape) -> dict[str, int | str]:
        """Everything that renders ``config`` for problems of ``shape``: what the compiler is given."""
        return {**self.defines(config), **self.problem_defines(shape)}

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        """The launch plan: kernels (and buffer zeroings) in order. ``device``: grids sized by SM count."""
        if not self.algorithms:
            raise NotImplementedError(f"{type(self).__name__} must define launches")
        return self.algorithm(config).launches(config, shape, device)

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        """Scratch buffers the launch plan needs besides inputs and outputs."""
        if self.algorithms:
            return self.algorithm(config).workspace(config, shape)
        return {}
