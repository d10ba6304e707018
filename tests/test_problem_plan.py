"""The dispatcher's problem plans without a GPU: workspaces the caller allocates (torch's caching allocator, for
CUDA graphs) are used as given; otherwise the plan allocates its own once per stream."""

from __future__ import annotations

from autotune.runtime.launch_plan import LaunchPlan
from autotune.runtime.problem_plan import ProblemPlan
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
