"""Which (kernel, dtype, shape) problems one ``autotune search`` tunes, in order.

Sources: ``--shape`` (repeatable), ``--shapes FILE`` (one shape per line, ``#`` comments) and
``--shapes-from shapes.json``, the calls an application made, as `autotune.record()` writes them::

    {"version": 1, "calls": [{"kernel": "gemm", "shape": [M, N, K], "dtype": "float16"}, ...]}

The problems are tuned one after the other, sharing the compile cache; each new study is warm-started by the
leaders of the shapes tuned before it (`autotune.tuning.warmstart`), so later shapes start from what earlier ones found.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autotune.errors import InvalidArgument
from autotune.shape import Shape, format_shape
from autotune.spaces import get_space


@dataclass(frozen=True)
class Problem:
    kernel: str
    dtype: str | None  # None: the kernel's first
    shape: Shape | None  # None: the kernel's default shape

    def label(self) -> str:
        return f"{self.kernel} {format_shape(self.shape) if self.shape else '(default shape)'} {self.dtype or ''}"


def load_calls(path: str | Path) -> list[Problem]:
    """The calls of a shapes file written by `autotune.record()`, checked whole by the loader `record` pairs
    with (`autotune.runtime.call_log.load_shapes`): one clear line on any fault."""
    from autotune.runtime.call_log import load_shapes

    calls = load_shapes(path)
    if not calls:
        raise InvalidArgument(f"--shapes-from {path}: holds no calls")
    return [Problem(kernel, dtype, shape) for kernel, shape, dtype in calls]


def read_shapes_file(path: str | Path, kernel: str, dtype: str | None) -> list[Problem]:
    """``--shapes FILE``: one shape per line (``4096x4096x4096`` or ``4096,4096,4096``), ``#`` comments."""
    space = get_space(kernel, dtype=dtype)
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise InvalidArgument(f"--shapes {path}: cannot read it ({exc.strerror})") from None
    out = []
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if text:
            try:
                out.append(Problem(kernel, dtype, space.parse_shape(text.replace(",", "x"))))
            except InvalidArgument as exc:
                raise InvalidArgument(f"--shapes {path} line {number}: {exc}") from None
    if not out:
        raise InvalidArgument(f"--shapes {path}: holds no shapes")
    return out


def plan(
    kernel: str | None,
    dtype: str | None,
    shapes: list[str] | None = None,
    shapes_file: str | None = None,
    shapes_from: str | None = None,
) -> list[Problem]:
    """Every problem to tune, in order, duplicates dropped; all checked before any is tuned."""
    problems: list[Problem] = []
    if kernel is None and shapes_from is None:
        raise InvalidArgument("name a KERNEL, or give --shapes-from FILE")
    if kernel is not None:
        space = get_space(kernel, dtype=dtype)
        problems += [Problem(kernel, dtype, space.parse_shape(s.replace(",", "x"))) for s in shapes or []]
        if shapes_file is not None:
            problems += read_shapes_file(shapes_file, kernel, dtype)
    elif shapes or shapes_file:
        raise InvalidArgument("--shape and --shapes need a KERNEL")
    if shapes_from is not None:
        calls = load_calls(shapes_from)
        if kernel is not None:
            calls = [c for c in calls if c.kernel == get_space(kernel).name and (dtype is None or c.dtype == dtype)]
            if not calls:
                raise InvalidArgument(f"--shapes-from {shapes_from}: no {kernel} calls")
        problems += calls
    if not problems and kernel is not None:
        problems.append(Problem(kernel, dtype, None))
    return list(dict.fromkeys(problems))
