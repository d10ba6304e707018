"""Problem shapes: tuples of positive ints, written ``4096x4096x4096`` on the command line and in the store."""

from __future__ import annotations

import re

from autotune.errors import InvalidArgument

Shape = tuple[int, ...]

# Far beyond any GPU's memory for every kernel we ship; catches typos such as 40960000000.
MAX_DIM = 2**40

_SEPARATOR = re.compile(r"\s*[x×,]\s*")


def parse_shape(text: str, dims: tuple[str, ...]) -> Shape:
    """Parse ``"4096x4096x4096"`` into ``(4096, 4096, 4096)`` for a kernel whose dimensions are ``dims``."""
    expected = "x".join(dims)
    text = str(text).strip()
    parts = _SEPARATOR.split(text) if text else []
    if len(parts) != len(dims) or not all(re.fullmatch(r"[+-]?\d+", p) for p in parts):
        raise InvalidArgument(
            f"malformed shape {text!r}: expected {len(dims)} positive integers {expected}, e.g. "
            f"{'x'.join(['1024'] * len(dims))}"
        )
    values = tuple(int(p) for p in parts)
    for name, value in zip(dims, values):
        if value < 1:
            raise InvalidArgument(f"shape {text!r}: {name} must be a positive integer, got {value}")
        if value > MAX_DIM:
            raise InvalidArgument(f"shape {text!r}: {name}={value} is implausibly large")
    return values


def format_shape(shape: Shape) -> str:
    return "x".join(str(int(d)) for d in shape)


# A range search (`expand_range`) stops here: each bucket is a study of its own.
MAX_BUCKETS = 64
_RANGE = re.compile(r"(\d+)\s*-\s*(\d+)")


def bucket_points(lo: int, hi: int) -> list[int]:
    """The buckets of one dimension's range: its ends and every power of two between them (the dispatcher takes
    the nearest tuned shape on a log scale, so powers of two leave no value more than √2 from a tuned one)."""
    points = {lo, hi}
    power = 1
    while power <= hi:
        if power >= lo:
            points.add(power)
        power *= 2
    return sorted(points)


def is_range(text: str) -> bool:
    """Whether a ``--shape`` names a range of shapes (a dimension written ``LO-HI``)."""
    return any(_RANGE.fullmatch(part) for part in _SEPARATOR.split(str(text).strip()))


def expand_range(text: str, dims: tuple[str, ...]) -> list[Shape]:
    """The bucket shapes of a range such as ``1-8192x4096x4096`` (any dimension may be ``LO-HI``): the product of
    each range's `bucket_points`, smallest first; at most `MAX_BUCKETS`."""
    parts = _SEPARATOR.split(str(text).strip())
    if len(parts) != len(dims):
        raise InvalidArgument(f"malformed shape range {text!r}: expected {len(dims)} dimensions {'x'.join(dims)}, "
                              f"each a positive integer or LO-HI, e.g. 1-8192x{'x'.join(['4096'] * (len(dims) - 1))}")
    axes: list[list[int]] = []
    for name, part in zip(dims, parts):
        match = _RANGE.fullmatch(part)
        if match is None:
            axes.append([parse_shape(part, (name,))[0]])
            continue
        lo, hi = (parse_shape(v, (name,))[0] for v in match.groups())
        if lo >= hi:
            raise InvalidArgument(f"shape range {text!r}: {name} runs {lo}-{hi}; write the smaller end first")
        axes.append(bucket_points(lo, hi))
    count = 1
    for axis in axes:
        count *= len(axis)
    if count > MAX_BUCKETS:
        raise InvalidArgument(f"shape range {text!r} makes {count} buckets; at most {MAX_BUCKETS}: narrow it, or "
                              f"range one dimension at a time")
    shapes: list[Shape] = [()]
    for axis in axes:
        shapes = [(*shape, value) for shape in shapes for value in axis]
    return shapes
