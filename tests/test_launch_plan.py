"""The one launch path without a GPU: a stand-in driver records what `LaunchPlan` hands to the CUDA driver API."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from autotune.errors import InvalidArgument
from autotune.runtime.launch_plan import LaunchPlan
from autotune.spaces.base import Launch, TensorMap, Zero


class StandInDriver:
    """Records launches (with the pointer and scalar values their parameter blocks hold at launch time), zeroings
    and tensor-map encodings."""

    def __init__(self):
        self.launched, self.zeroed, self.encoded, self.dependent = [], [], [], []

    def launcher(self, function, grid, block, shared, overlaps_previous=False):
        self.dependent.append(overlaps_previous)

        def call(stream, params):
            self.launched.append((function, grid, block, shared, stream, params))
            return 0

        return call

    def zero(self, ptr, nbytes, stream):
        self.zeroed.append((ptr, nbytes, stream))

    def encode_tensor_map(self, address, pointer, data_type, rank, dims, strides, box, element_strides, swizzle):
        self.encoded.append((pointer, data_type, rank, list(dims), list(strides)[: rank - 1], list(box), swizzle))
        ctypes.memset(address, 0x5A, 128)

    def check(self, code, what):
        raise AssertionError(f"{what} returned {code}")


def value(params, index, ctype):
    return ctype.from_address(params[index]).value


def test_pointers_are_written_per_call_and_scalars_once():
    driver = StandInDriver()
    steps = [Zero("acc"), Launch("k", (4, 1, 1), (128, 1, 1), 0, ("x", np.int32(7), "acc", np.float32(0.5)))]
    functions = []
    plan = LaunchPlan(driver, steps, lambda kernel, shared: functions.append(kernel) or 0xF00,
                      ("x", "acc"), {"acc": 256})  # fmt: skip
    assert functions == ["k"], "each kernel's function is looked up once, at build time"
    plan.launch([0x1000, 0x2000], stream=3)
    plan.launch([0x1100, 0x2100], stream=4)
    assert driver.zeroed == [(0x2000, 256, 3), (0x2100, 256, 4)]
    (f1, grid, block, shared, s1, p1), (_, _, _, _, s2, p2) = driver.launched
    assert (f1, grid, block, shared, s1, s2) == (0xF00, (4, 1, 1), (128, 1, 1), 0, 3, 4)
    assert value(p2, 0, ctypes.c_uint64) == 0x1100 and value(p2, 2, ctypes.c_uint64) == 0x2100
    assert value(p2, 1, ctypes.c_int32) == 7 and value(p2, 3, ctypes.c_float) == 0.5


def test_a_tensor_map_is_encoded_for_its_buffer_and_again_only_when_the_pointer_moves():
    driver = StandInDriver()
    a = TensorMap("A", "bfloat16", dims=(4096, 1000), box=(64, 128))
    b = TensorMap("B", "float16", dims=(512, 4096), box=(32, 64), swizzle=64)
    plan = LaunchPlan(driver, [Launch("k", (1, 1, 1), (384, 1, 1), 0, (a, b, "C"))], lambda *_: 1,
                      ("A", "B", "C"), {})  # fmt: skip
    for pointers in ([0x10000, 0x20000, 0x30000], [0x10000, 0x20000, 0x40000], [0x50000, 0x20000, 0x40000]):
        plan.launch(pointers, 0)
    assert driver.encoded == [
        (0x10000, 9, 2, [4096, 1000], [8192], [64, 128], 3),  # bf16, row stride 4096·2 bytes, 128-byte swizzle
        (0x20000, 6, 2, [512, 4096], [1024], [32, 64], 2),  # fp16, 64-byte swizzle
        (0x50000, 9, 2, [4096, 1000], [8192], [64, 128], 3),  # A moved; B did not
    ]
    params = driver.launched[0][5]
    assert params[0] % 64 == 0 and params[1] % 64 == 0, "CUtensorMap parameters are 64-byte aligned"
    assert ctypes.string_at(params[0], 128) == b"\x5a" * 128, "the parameter points at the encoded map"


def test_an_unaligned_pointer_for_a_tensor_map_is_one_clear_error():
    driver = StandInDriver()
    plan = LaunchPlan(driver, [Launch("k", (1, 1, 1), (128, 1, 1), 0,
                                      (TensorMap("A", "float16", dims=(64, 64), box=(64, 64)),))],
                      lambda *_: 1, ("A",), {})  # fmt: skip
    with pytest.raises(InvalidArgument, match="A at 0x1002 is not 16-byte aligned"):
        plan.launch([0x1002], 0)
    assert driver.launched == [] and driver.encoded == []


@pytest.mark.parametrize(
    "spec, problem",
    [
        (TensorMap("A", "float16", dims=(33, 64), box=(64, 64)), "not a multiple of 16"),
        (TensorMap("A", "float16", dims=(64, 64), box=(128, 64)), "exceeds the 128-byte swizzle"),
        (TensorMap("A", "float32", dims=(64, 64), box=(64, 512), swizzle=0), "each extent must be 1 to 256"),
        (TensorMap("A", "float16", dims=(64, 64), box=(64,)), "rank 2 with a box of rank 1"),
    ],
)
def test_tensor_maps_the_copy_engine_cannot_take_are_refused_when_the_plan_is_built(spec, problem):
    assert any(problem in p for p in spec.problems())
    with pytest.raises(InvalidArgument, match=problem):
        LaunchPlan(StandInDriver(), [Launch("k", (1, 1, 1), (1, 1, 1), 0, (spec,))], lambda *_: 1, ("A",), {})
    assert TensorMap("A", "bfloat16", dims=(4096, 4096), box=(64, 256)).problems() == []


def test_describe_gives_another_executor_the_same_launches():
    """The torch operators' C++ launcher runs a plan from `describe`: the same functions, geometry, scalars
    (as bytes), pointer slots and tensor maps as the ctypes path."""
    driver = StandInDriver()
    tmap = TensorMap("x", "float16", dims=(64, 32), box=(64, 16))
    steps = [Zero("acc"), Launch("k", (4, 1, 2), (128, 1, 1), 1024, ("x", np.int32(7), tmap, "acc", np.float32(0.5)))]
    plan = LaunchPlan(driver, steps, lambda kernel, shared: 0xF00, ("x", "acc"), {"acc": 256})
    zero, launch = plan.describe()
    assert zero == ("zero", 1, 256)
    kind, kernel, function, grid, block, shared, args, overlaps = launch
    assert (kind, kernel, function, grid, block, shared) == ("launch", "k", 0xF00, (4, 1, 2), (128, 1, 1), 1024)
    assert overlaps is False and driver.dependent == [False]
    assert args[0] == ("ptr", 0) and args[3] == ("ptr", 1)
    assert args[1] == ("value", np.int32(7).tobytes()) and args[4] == ("value", np.float32(0.5).tobytes())
    assert args[2] == ("tmap", 0, 6, (64, 32), (128,), (64, 16), 3), "float16 is CUtensorMapDataType 6; 128B swizzle 3"


def test_a_dependent_launch_reaches_the_driver_and_the_description():
    """A step marked ``overlaps_previous`` (a programmatic dependent launch) is launched so by the ctypes path and
    described so for the C++ launcher; the step before it is not."""
    driver = StandInDriver()
    steps = [Launch("split", (8, 1, 1), (128, 1, 1), 0, ("x",)),
             Launch("combine", (2, 1, 1), (64, 1, 1), 0, ("x",), overlaps_previous=True)]  # fmt: skip
    plan = LaunchPlan(driver, steps, lambda kernel, shared: 1, ("x",), {})
    assert driver.dependent == [False, True]
    assert [d[-1] for d in plan.describe()] == [False, True]
    plan.launch([0x1000], 0)
    assert [grid for _, grid, *_ in driver.launched] == [(8, 1, 1), (2, 1, 1)], "in order, on one stream"
