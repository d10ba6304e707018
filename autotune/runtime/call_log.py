"""Which (kernel, shape, dtype) problems a program runs, so that a search can tune exactly those.

    with autotune.record() as calls:      # every problem that reaches the dispatcher (or autotune.torch)
        model(x)
    calls.save("shapes.json")             # {"version": 1, "calls": [{"kernel": "gemm", "shape": [M, N, K],
                                          #                            "dtype": "float16"}, ...]}
    autotune search --shapes-from shapes.json

Each distinct problem is listed once, in the order first seen. Recording costs one attribute read per kernel call
while no recorder is active. `load_shapes` reads such a file back, checking it the way ``autotune import`` checks
its files: a hand-edited mistake is refused whole with one line naming where it is.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from autotune.errors import AutotuneError, InvalidArgument

if TYPE_CHECKING:
    from autotune.spaces.base import KernelSpace

VERSION = 1

Call = tuple[str, tuple[int, ...], str]  # (kernel, problem shape, dtype)

# The active recorders (innermost last); None while nothing records, so the hot path reads one global.
ACTIVE: list["Recorder"] | None = None
_LOCK = threading.Lock()


class Recorder:
    """The distinct problems seen while active, in order; made by `record`."""

    def __init__(self) -> None:
        self._seen: dict[Call, int] = {}

    def add(self, call: Call) -> None:
        self._seen[call] = self._seen.get(call, 0) + 1

    @property
    def calls(self) -> list[Call]:
        return list(self._seen)

    def count(self, call: Call) -> int:
        """How many kernel calls had this problem."""
        return self._seen.get(call, 0)

    def __iter__(self) -> Iterator[Call]:
        return iter(self.calls)

    def __len__(self) -> int:
        return len(self._seen)

    def to_dict(self) -> dict[str, Any]:
        return {"version": VERSION,
                "calls": [{"kernel": k, "shape": list(s), "dtype": d} for k, s, d in self._seen]}  # fmt: skip

    def save(self, path: str | Path) -> Path:
        target = Path(path)
        try:
            target.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        except OSError as exc:
            raise InvalidArgument(f"cannot write {target}: {exc.strerror}") from None
        return target


class record:
    """Context manager: ``with autotune.record() as calls:`` collects the problems of the kernel calls inside
    (from every thread). ``record("shapes.json")`` also writes the file on leaving the block."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = path
        self.recorder = Recorder()

    def __enter__(self) -> Recorder:
        global ACTIVE
        with _LOCK:
            ACTIVE = [*(ACTIVE or []), self.recorder]
            _tell_listeners()
        return self.recorder

    def __exit__(self, *exc: Any) -> None:
        global ACTIVE
        with _LOCK:
            left = [r for r in ACTIVE or [] if r is not self.recorder]
            ACTIVE = left or None
            _tell_listeners()
        if self.path is not None and exc[0] is None:
            self.recorder.save(self.path)


_LISTENERS: list[Callable[[bool], None]] = []


def on_recording(listener: Callable[[bool], None]) -> None:
    """Call ``listener(active)`` whenever recording starts or stops (and once now): for launch paths that do not
    look at `ACTIVE` per call (the torch operators' C++ launcher)."""
    with _LOCK:
        _LISTENERS.append(listener)
        listener(ACTIVE is not None)


def _tell_listeners() -> None:
    for listener in _LISTENERS:
        listener(ACTIVE is not None)


def note(kernel: str, shape: tuple[int, ...], dtype: str) -> None:
    """Called by the dispatcher per kernel call while `ACTIVE` is set."""
    active = ACTIVE
    if active:
        call = (kernel, tuple(int(d) for d in shape), dtype)
        for recorder in active:
            recorder.add(call)


def record_name(space: KernelSpace) -> str:
    """The kernel of a call as a recorder lists it: a library kernel by its name, a space from elsewhere by its
    import reference (what a search takes)."""
    from autotune.spaces import kernel_names, space_class

    cls = type(space)
    if space.name in kernel_names() and space_class(space.name) is cls:
        return space.name
    return cls.ref()  # a file.py:Class space by its file's absolute path


def load_shapes(path: str | Path) -> list[Call]:
    """The problems of a file written by `record` (kernel, shape, dtype), each checked against its kernel's
    space; `InvalidArgument` names the first bad entry (``shapes.json: calls[2].shape: …``)."""
    from autotune.spaces import get_space

    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"{path} is not JSON: {exc.msg} at line {exc.lineno}") from None

    def bad(where: str, what: str) -> InvalidArgument:
        return InvalidArgument(f"{path}: {where}: {what}")

    if not isinstance(data, dict):
        raise bad("file", f"expected an object, got {type(data).__name__}")
    if data.get("version") != VERSION or isinstance(data.get("version"), bool):
        raise bad("version", f"expected {VERSION}, got {data.get('version')!r}")
    calls = data.get("calls")
    if not isinstance(calls, list):
        raise bad("calls", "missing" if calls is None else f"expected a list, got {type(calls).__name__}")
    out: list[Call] = []
    for i, entry in enumerate(calls):
        where = f"calls[{i}]"
        if not isinstance(entry, dict):
            raise bad(where, f"expected an object, got {type(entry).__name__}")
        unknown = sorted(set(entry) - {"kernel", "shape", "dtype"})
        if unknown:
            raise bad(where, f"unknown field {unknown[0]!r}")
        for key in ("kernel", "shape", "dtype"):
            if key not in entry:
                raise bad(f"{where}.{key}", "missing")
        kernel, shape, dtype = entry["kernel"], entry["shape"], entry["dtype"]
        if not isinstance(kernel, str) or not kernel.strip():
            raise bad(f"{where}.kernel", f"expected a kernel name, got {kernel!r}")
        if not isinstance(dtype, str):
            raise bad(f"{where}.dtype", f"expected a dtype name, got {dtype!r}")
        try:
            space = get_space(kernel, dtype=dtype)
        except AutotuneError as exc:
            raise bad(f"{where}", str(exc)) from None
        forms = (space.dims, *space.other_dims)
        if (not isinstance(shape, list) or len(shape) not in {len(f) for f in forms}
                or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape)):  # fmt: skip
            expected = " or ".join(f"{len(f)} integers [{', '.join(f)}]" for f in forms)
            raise bad(f"{where}.shape", f"expected {expected}, got {shape!r}")
        try:
            parsed = space.parse_shape("x".join(str(d) for d in shape))
        except AutotuneError as exc:
            raise bad(f"{where}.shape", str(exc)) from None
        out.append((kernel, parsed, space.dtype))
    return list(dict.fromkeys(out))
