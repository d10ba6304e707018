"""What the run-time dispatcher asks of a space about the problems it is called on: their shape and dtype from the
caller's arrays, which tuned shapes may stand in for them, and what runs where nothing tuned fits.

One of the groups of hooks `KernelSpace` is made of (`autotune.runtime.selection` and `autotune.runtime.dispatch`
call these; a search measures `rule_default` among its first trials).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from autotune.errors import InvalidType

if TYPE_CHECKING:
    from autotune.device import DeviceInfo
    from autotune.shape import Shape
    from autotune.spaces.base import Config


class Dispatching:
    """Shape and dtype inference and the fallback rules of a `KernelSpace` (see the module)."""

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        """The problem shape from the shapes of the caller's input arrays (runtime dispatch); raises
        `InvalidArgument` naming the argument that does not fit."""
        raise NotImplementedError(f"{self.name} does not support runtime dispatch")

    @classmethod
    def infer_dtype(cls, given: Mapping[str, str]) -> str:
        """The problem dtype from the dtypes of the caller's input arrays (name → dtype name). By default every
        input has the problem's dtype; `InvalidType` names the argument that does not."""
        supported = cls.supported_dtypes()
        names = list(given)
        for name in names:
            if given[name] not in supported:
                raise InvalidType(f"{name} has dtype {given[name]}; {cls.name} supports {', '.join(supported)}")
        first = given[names[0]]
        for name in names[1:]:
            if given[name] != first:
                raise InvalidType(f"{name} has dtype {given[name]} but {names[0]} has {first}: {cls.name} needs "
                                  f"every input in one dtype")  # fmt: skip
        return first

    def shape_key(self, shape: Shape) -> tuple:
        """What a tuned shape must share with a problem for its configuration to be used there at all (e.g.
        attention's head_dim): the dispatcher never falls back across it."""
        return ()

    def shape_class(self, shape: Shape) -> tuple:
        """The class of a shape (e.g. GEMM's M bucket and aspect): the dispatcher's fallback prefers configurations
        tuned for shapes of the same class, and where none fits runs `rule_default`, not another class's winner."""
        return ()

    def rule_default(self, shape: Shape, device: DeviceInfo) -> Config:
        """What the dispatcher runs where nothing tuned fits: by default the template's default configuration;
        a space may pick by the shape's class (a 1-row GEMM wants another tile than a square one)."""
        return dict(self.default_config)
