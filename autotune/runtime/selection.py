"""Which configuration the dispatcher runs for a shape: the stored one, the nearest valid one, or the default.

Pure logic over stored rows, so every rule is tested without a GPU:

1. Rows tuned on another GPU model or compute capability are never used.
2. Rows whose template hash differs from the template as it is now are stale and never used, unless their
   configuration still builds the very cubin they were tuned with (``revalidate``: the dispatcher compiles it and
   compares the stored code hash, `autotune.results.storage.CodeHash`); a comment edit keeps tuned rows, and a
   parameter added since takes its default (`KernelSpace.completed`), which is what the row was compiled with.
3. The row of the exact shape, if any.
4. Else the nearest tuned shape (Euclidean distance between the logs of the dimensions) whose configuration
   is valid for this shape on this device, among the shapes of the same key (`KernelSpace.shape_key`: never
   crossed) and the same class (`KernelSpace.shape_class`: a 1-row GEMM does not borrow a square tile).
5. Else the space's rule-based default for the shape (`KernelSpace.rule_default`; by default the template's
   default configuration).

Anything but (3) is a fallback and carries its reason; `describe_fallback` says what runs instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from autotune.device import DeviceInfo
from autotune.errors import NotTuned
from autotune.shape import Shape, format_shape
from autotune.spaces.base import Config, KernelSpace

TUNED, NEAREST, DEFAULT = "tuned", "nearest", "default"


class TunedRow(Protocol):
    device_name: str
    compute_capability: str
    shape: str
    dtype: str
    template_hash: str

    @property
    def config(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Choice:
    config: Config
    source: str  # TUNED | NEAREST | DEFAULT
    reason: str  # why this is not the exact tuned configuration (empty for TUNED)
    row: Any = None  # the stored row used, if any


def log_distance(a: Shape, b: Shape) -> float:
    return math.sqrt(sum((math.log(x) - math.log(y)) ** 2 for x, y in zip(a, b)))


def choose(
    space: KernelSpace,
    shape: Shape,
    device: DeviceInfo,
    rows: Sequence[TunedRow],
    template_hash: str,
    *,
    strict: bool = False,
    revalidate: Callable[[Any], bool] | None = None,
) -> Choice:
    """The configuration to run; ``strict`` raises `NotTuned` instead of any fallback. ``revalidate(row)``: whether
    a row of another template hash builds the same machine code now (asked only of rows that would be used)."""
    choice = _choose(space, shape, device, rows, template_hash, revalidate)
    if strict and choice.source != TUNED:
        raise NotTuned(f"{choice.reason} (strict: no fallback)")
    return choice


def _choose(space: KernelSpace, shape: Shape, device: DeviceInfo, rows: Sequence[TunedRow], template_hash: str,
            revalidate: Callable[[Any], bool] | None) -> Choice:  # fmt: skip
    shape_text = format_shape(shape)
    rows = [r for r in rows if r.dtype == space.dtype]
    here = [r for r in rows if r.device_name == device.name and r.compute_capability == device.cc]
    elsewhere = sorted({f"{r.device_name} (cc {r.compute_capability})" for r in rows} - {f"{device.name} (cc {device.cc})"})
    # Rows of this template first; one of another is used where its machine code is unchanged (asked lazily:
    # `revalidate` compiles).
    here.sort(key=lambda r: r.template_hash != template_hash)
    kept: list = []

    def usable(row: Any) -> bool:
        if row.template_hash == template_hash:
            return True
        if revalidate is not None and revalidate(row):
            kept.append(row)
            return True
        return False

    exact = next((r for r in here if r.shape == shape_text and usable(r)), None)
    if exact is not None:
        return Choice(space.completed(exact.config), TUNED, "", exact)

    # Fallbacks stay within the shape's key (never across it) and class (a 1-row GEMM does not borrow a square
    # tile): where the space has classes and none of this class fits, its rule-based default runs instead.
    key, klass = space.shape_key(shape), space.shape_class(shape)
    same = [r for r in here if space.shape_key(space.parse_shape(r.shape)) == key]
    other_classes = [r for r in same if space.shape_class(space.parse_shape(r.shape)) != klass]
    same = [r for r in same if r not in other_classes]
    other_classes = [r for r in other_classes if r.template_hash == template_hash]  # for the reason
    ranked = sorted(same, key=lambda r: log_distance(space.parse_shape(r.shape), shape))
    rejected = []
    for row in ranked:
        if not usable(row):
            continue
        config = space.completed(row.config)  # a parameter added since the row was tuned: its default
        problems = space.violations(config, shape, device)
        if not problems:
            return Choice(config, NEAREST, f"{shape_text} was not tuned on {device.name}; the nearest "
                          f"tuned shape is {row.shape}", row)  # fmt: skip
        rejected.append(f"{row.shape} ({problems[0]})")

    stale = sum(r.template_hash != template_hash for r in here) - len(kept)
    why = [f"no configuration of {space.name} tuned for {shape_text} or a compatible shape on {device.name}"]
    if rejected:
        why.append("tuned shapes whose configuration does not fit: " + ", ".join(rejected[:3]))
    if other_classes:
        why.append(f"{len(other_classes)} tuned for shapes of another class ({', '.join(sorted({r.shape for r in other_classes})[:3])})")
    if stale:
        why.append(f"{stale} stale (the template changed since they were tuned)")
    if elsewhere and not here:
        why.append("tuned only on " + ", ".join(elsewhere))
    reason = "; ".join(why)
    default = space.rule_default(shape, device)
    problems = space.violations(default, shape, device)
    if problems:
        raise NotTuned(f"{reason}; and the default configuration does not fit: {problems[0]}")
    return Choice(default, DEFAULT, reason)


def describe_fallback(choice: Choice) -> str:
    """What runs instead, for the log line of a fallback."""
    if choice.source == NEAREST:
        return f"running the configuration tuned for {choice.row.shape}"
    return "running the default configuration for its shape"
