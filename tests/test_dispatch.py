"""The dispatcher's problem plans without a GPU: workspaces the caller allocates (torch's caching allocator, for
CUDA graphs) are used as given; otherwise the plan allocates its own once per stream."""

from __future__ import annotations

from autotune.runtime.dispatch import ProblemPlan
from autotune.runtime.launch_plan import LaunchPlan
from autotune.runtime.selection import Choice
from autotune.spaces.base import BufferSpec, Zero


class RecordingDriver:
    def __init__(self):
        self.allocs, self.zeroed = [], []

    def alloc(self, nbytes):
        self.allocs.append(nbytes)
        return 0x1000 * len(self.allocs)

    def zero(self, ptr, nbytes, stream):
        self.zeroed.append((ptr, nbytes, stream))


def plan(driver) -> ProblemPlan:
    launches = LaunchPlan(driver, [Zero("scratch")], lambda kernel, shared: 0, ("x", "y", "scratch"),
                          {"y": 128, "scratch": 64})  # fmt: skip
    return ProblemPlan((4, 8), "float32", Choice.__new__(Choice), launches, {"y": BufferSpec((4, 8))},
                       {"scratch": BufferSpec((16,))}, kernel="toy")  # fmt: skip


def test_caller_workspace_is_used_as_given():
    driver = RecordingDriver()
    p = plan(driver)
    p.run(driver, {"x": 1, "y": 2, "scratch": 0xABC}, stream=7)
    p.launch(driver, [1, 2, 0xDEF], stream=8)
    assert driver.allocs == [] and driver.zeroed == [(0xABC, 64, 7), (0xDEF, 64, 8)]


def test_without_one_the_plan_allocates_once_per_stream():
    driver = RecordingDriver()
    p = plan(driver)
    for stream in (7, 7, 9):
        p.run(driver, {"x": 1, "y": 2}, stream=stream)
    p.launch(driver, [1, 2], stream=9)
    assert driver.allocs == [64, 64]
    assert [z[0] for z in driver.zeroed] == [0x1000, 0x1000, 0x2000, 0x2000]


def test_the_dispatcher_reads_a_read_only_store_creating_nothing(tmp_path):
    """`autotune.load`'s read of the store (its own method; constructing a TunedKernel needs a GPU): from a
    WAL database whose file and folder have no write bit, the rows, and no file beside it."""
    import os
    import types

    from test_storage import _wal_database, read_only_folder

    from autotune.runtime.dispatch import TunedKernel
    from autotune.spaces import get_space

    from conftest import file_digest

    folder = tmp_path / "image"
    folder.mkdir()
    _wal_database(folder / "a.db")
    read_only_folder(folder, folder / "a.db")
    before = file_digest(folder / "a.db")
    try:
        stand_in = types.SimpleNamespace(strict=True, space=get_space("gemm"))
        rows = TunedKernel._read_rows(stand_in, str(folder / "a.db"))  # type: ignore[arg-type]
        assert [(r.kernel, r.shape) for r in rows] == [("gemm", "4096x4096x4096")]
        assert [p.name for p in folder.iterdir()] == ["a.db"] and file_digest(folder / "a.db") == before
    finally:
        os.chmod(folder, 0o755)
