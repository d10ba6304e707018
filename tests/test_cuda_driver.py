"""The CUDA driver layer without a GPU: what it asks of a stand-in libcuda."""

from __future__ import annotations

import ctypes

from autotune.runtime.cuda_driver import (
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
    CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
    CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
    CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
    CUlaunchAttribute,
    CUlaunchConfig,
    Driver,
)


class StandInLib:
    def __init__(self, cluster_width: int = 0, knows_clusters: bool = True) -> None:
        self.attributes: list[tuple[int, int, int]] = []
        self.cluster_width = cluster_width
        self.knows_clusters = knows_clusters

    def cuFuncSetAttribute(self, function: int, attribute: int, value: int) -> int:
        self.attributes.append((function, attribute, value))
        return 0

    def cuFuncGetAttribute(self, value, attribute: int, function: int) -> int:  # noqa: ANN001 (a ctypes byref)
        # A kernel compiled with __cluster_dims__(W, 1, 1) reports W, 1, 1; one without, 0, 0, 0. A driver older
        # than CUDA 11.8 has no such attributes: CUDA_ERROR_INVALID_VALUE.
        if not self.knows_clusters:
            return 1
        width = self.cluster_width
        ctypes.cast(value, ctypes.POINTER(ctypes.c_int))[0] = (
            width if attribute == CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH else min(width, 1))
        return 0


def test_any_dynamic_shared_memory_is_allowed_explicitly():
    """48 KiB of dynamic shared memory beside a kernel's static shared memory exceeds the default allowance (48 KiB
    less the static part): the H100 refused such a launch (CUDA_ERROR_INVALID_VALUE, layernorm_backward_persistent
    with 49152 B dynamic) until the attribute was set for every dynamic size, not only above 48 KiB."""
    driver = Driver.__new__(Driver)  # no libcuda here: only the attribute call is exercised
    driver.lib = StandInLib()
    for nbytes in (0, 1024, 48 * 1024, 100 * 1024):
        driver.allow_dynamic_shared(7, nbytes)
    attribute = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    assert driver.lib.attributes == [(7, attribute, 1024), (7, attribute, 48 * 1024), (7, attribute, 100 * 1024)]


def test_a_cluster_past_the_portable_size_is_opted_in():
    """A kernel compiled for a cluster of 16 blocks (split_kv's COMBINE=1 with 16 splits) launches only after
    NON_PORTABLE_CLUSTER_SIZE_ALLOWED; one of 8 or none is left as it is."""
    non_portable = (7, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
    for width, opted in ((0, False), (8, False), (16, True)):
        driver = Driver.__new__(Driver)
        driver.lib = StandInLib(cluster_width=width)
        driver.prepare(7, 0)
        assert (non_portable in driver.lib.attributes) is opted, width
    driver = Driver.__new__(Driver)
    driver.lib = StandInLib(knows_clusters=False)
    driver.prepare(7, 1024)  # an old driver: the dynamic shared memory as before, no cluster opt-in, no error
    assert driver.lib.attributes == [(7, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024)]


def test_a_dependent_launch_is_cuLaunchKernelEx_with_programmatic_serialization():
    """`Launch.overlaps_previous` reaches libcuda as cuLaunchKernelEx with one attribute,
    PROGRAMMATIC_STREAM_SERIALIZATION = 1, the geometry and the call's stream; a driver without cuLaunchKernelEx
    (older than CUDA 11.8) launches plainly. The structures have cuda.h's layout (CUDA 13, LP64)."""
    assert (ctypes.sizeof(CUlaunchAttribute), ctypes.sizeof(CUlaunchConfig)) == (72, 56)
    assert (CUlaunchConfig.stream.offset, CUlaunchConfig.attrs.offset, CUlaunchConfig.count.offset) == (32, 40, 48)
    seen = []

    def launch_ex(config, function, params, extra):
        c = config._obj  # what ctypes.byref points at
        attribute = c.attrs[0]
        seen.append((tuple(c.grid), tuple(c.block), c.shared, c.stream, c.count, attribute.id, attribute.value[0],
                     function.value, params))
        return 0

    def plain(function, *rest):
        seen.append(("plain", function.value))
        return 0

    driver = Driver.__new__(Driver)
    driver._launch, driver._launch_ex = plain, launch_ex
    call = driver.launcher(7, (16, 1, 1), (128, 1, 1), 0, overlaps_previous=True)
    assert call(0xABC, "params") == 0
    assert seen == [((16, 1, 1), (128, 1, 1), 0, 0xABC, 1, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, 1,
                     7, "params")]  # fmt: skip
    driver._launch_ex = None
    driver.launcher(7, (16, 1, 1), (128, 1, 1), 0, overlaps_previous=True)(0, None)
    assert seen[-1] == ("plain", 7)
