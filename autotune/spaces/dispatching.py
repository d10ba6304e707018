"""What the run-time dispatcher asks of a space about the problems it is called on: their shape and dtype from the
caller's arrays, which tuned shapes may stand in for them, and what runs where nothing tuned fits.

One of the groups of hooks `KernelSpace` is made of (`autotune.runtime.selection` and `autotune.runtime.dispatch`
call these; a search measures `rule_default` among its first trials).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar, Mapping

from autotune.errors import InvalidArgument, InvalidType

if TYPE_CHECKING:
    from autotune.device import DeviceInfo
    from autotune.shape import Shape
    from autotune.spaces.base import Config


class Dispatching:
    """Shape and dtype inference and the fallback rules of a `KernelSpace` (see the module)."""

    # Buffers whose first dim a caller may pass as several leading dims, a (batch, seq, hidden) activation as it is:
    # name → the buffer's rank in the kernel (layernorm's x 2, its mean 1). `flatten_leading` folds the inputs'
    # leading dims into that first dim, and the outputs named here get them back (`leading_shape`), so that
    # autotune.torch's operators take N-D activations with no reshape or view around the call. Empty: exact shapes.
    leading_dims: ClassVar[Mapping[str, int]] = {}

    @classmethod
    def flatten_leading(cls, inputs: Mapping[str, tuple]) -> tuple[dict[str, tuple], tuple | None]:
        """The inputs' shapes with the leading dims of the `leading_dims` buffers folded into one, and those
        leading dims (None where no such buffer has more dims than the kernel's; sizes may be symbolic). Raises
        `InvalidArgument` where two of them differ in their leading dims."""
        flat, leading, first = dict(inputs), None, ""
        for name, shape in inputs.items():
            rank = cls.leading_dims.get(name)
            if rank is None or len(shape) < rank:  # too few dims: infer_shape names the mistake
                continue
            lead = tuple(shape[:len(shape) - rank + 1])
            if leading is None:
                leading, first = lead, name
            elif lead != leading:
                raise InvalidArgument(f"{name} has leading dims {lead} but {first} has {leading}: they must match")
            if len(lead) > 1:
                flat[name] = (math.prod(lead), *shape[len(lead):])
        return flat, (leading if leading is not None and len(leading) > 1 else None)

    @classmethod
    def leading_shape(cls, output: str, shape: tuple, leading: tuple | None) -> tuple:
        """An output's shape for inputs that had ``leading`` dims (`flatten_leading`): ``shape`` itself where
        there were none or the output does not carry them."""
        if leading is None or output not in cls.leading_dims:
            return tuple(shape)
        return (*leading, *shape[1:])

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
