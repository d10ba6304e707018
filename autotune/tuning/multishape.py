"""Which (kernel, dtype, shape) problems one ``autotune search`` tunes, in order.

Sources: ``--shape`` (repeatable), ``--shapes FILE`` (one shape per line, ``#`` comments) and
``--shapes-from shapes.json``, the calls an application made, as `autotune.record()` writes them::

    {"version": 1, "calls": [{"kernel": "gemm", "shape": [M, N, K], "dtype": "float16"}, ...]}

The problems are tuned one after the other, sharing the compile cache; each new study is warm-started by the
leaders of the shapes tuned before it (`autotune.tuning.warmstart`), so later shapes start from what earlier ones found.

A range (``--shape 1-8192x4096x4096``: any dimension ``LO-HI``; serving sees every M) is tuned as its buckets
(`autotune.shape.expand_range`: the ends and the powers of two between), in `bisection_order` (the largest, the
smallest, then each gap's middle), so that each bucket but the ends is warm-started by tuned neighbours on both
sides, ``--trials`` split evenly over them (at least `MIN_BUCKET_TRIALS` each); the dispatcher runs
the nearest tuned bucket for any shape of the range (`autotune.runtime.selection`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autotune.errors import InvalidArgument
from autotune.shape import Shape, expand_range, format_shape, is_range
from autotune.spaces import get_space

MIN_BUCKET_TRIALS = 10  # below this a search measures little beyond the defaults and the warm-start seeds


@dataclass(frozen=True)
class Problem:
    kernel: str
    dtype: str | None  # None: the kernel's first
    shape: Shape | None  # None: the kernel's default shape
    range_of: str | None = None  # the range this shape is a bucket of (``--shape LO-HI x …``)
    buckets: int = 1  # how many buckets that range has: they share one ``--trials``

    def label(self) -> str:
        return f"{self.kernel} {format_shape(self.shape) if self.shape else '(default shape)'} {self.dtype or ''}"

    def trials(self, budget: int) -> int:
        """This problem's share of ``--trials``: all of it, or a range's even split."""
        return budget if self.range_of is None else max(MIN_BUCKET_TRIALS, budget // self.buckets)


def bisection_order(count: int) -> list[int]:
    """Indices 0..count-1: the last, the first, then the middle of every gap between those already taken, level
    by level. Smallest first, a range's middle buckets had only smaller neighbours to start from: 512-2048 rows
    of fp32 4096x4096 ended at 0.91-0.94x their own searches, where the 4096 bucket's winner was theirs (H200,
    2026-11-29h)."""
    order = [count - 1, 0][: count]
    gaps = [(0, count - 1)]
    while gaps:
        wider = []
        for low, high in gaps:
            if high - low >= 2:
                middle = (low + high) // 2
                order.append(middle)
                wider += [(low, middle), (middle, high)]
        gaps = wider
    return list(dict.fromkeys(order))


def shape_problems(kernel: str, dtype: str | None, text: str) -> list[Problem]:
    """One ``--shape`` (or line of ``--shapes``): a shape, or the buckets of a range."""
    space = get_space(kernel, dtype=dtype)
    if not is_range(text):
        return [Problem(kernel, dtype, space.parse_shape(text.replace(",", "x")))]
    shapes = expand_range(text, space.dims)
    return [Problem(kernel, dtype, shapes[i], range_of=text, buckets=len(shapes)) for i in bisection_order(len(shapes))]


def load_calls(path: str | Path) -> list[Problem]:
    """The calls of a shapes file written by `autotune.record()`, checked whole by the loader `record` pairs
    with (`autotune.runtime.call_log.load_shapes`): one clear line on any fault."""
    from autotune.runtime.call_log import load_shapes

    calls = load_shapes(path)
    if not calls:
        raise InvalidArgument(f"--shapes-from {path}: holds no calls")
    return [Problem(kernel, dtype, shape) for kernel, shape, dtype in calls]


def read_shapes_file(path: str | Path, kernel: str, dtype: str | None) -> list[Problem]:
    """``--shapes FILE``: one shape (or range) per line (``4096x4096x4096`` or ``4096,4096,4096``), ``#``
    comments."""
    get_space(kernel, dtype=dtype)  # an unknown kernel or dtype: one line, before the file is read
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise InvalidArgument(f"--shapes {path}: cannot read it ({exc.strerror})") from None
    out = []
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if text:
            try:
                out += shape_problems(kernel, dtype, text)
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
        get_space(kernel, dtype=dtype)  # an unknown kernel or dtype: one line, whatever else is wrong
        problems += [p for s in shapes or [] for p in shape_problems(kernel, dtype, s)]
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
