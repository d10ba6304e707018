"""The CUDA driver layer without a GPU: what it asks of a stand-in libcuda."""

from __future__ import annotations

from autotune.runtime.cuda_driver import CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, Driver


class StandInLib:
    def __init__(self) -> None:
        self.attributes: list[tuple[int, int, int]] = []

    def cuFuncSetAttribute(self, function: int, attribute: int, value: int) -> int:
        self.attributes.append((function, attribute, value))
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
