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
