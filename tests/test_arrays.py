"""How the dispatcher reads its arguments (autotune.runtime.arrays), without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.errors import InvalidArgument, InvalidType
from autotune.runtime.arrays import CAI, HOST, check_matches, describe, stream_handle


class FakeDeviceArray:
    """Any third-party GPU array: only __cuda_array_interface__."""

    def __init__(self, shape, typestr="<f4", strides=None, ptr=0x7F0000000000, readonly=False, stream=None):
        self.__cuda_array_interface__ = {
            "shape": shape, "typestr": typestr, "data": (ptr, readonly), "strides": strides, "version": 3,
            "stream": stream,
        }  # fmt: skip


def test_numpy():
    a = np.zeros((3, 4), np.float32)
    arg = describe("A", a)
    assert arg.kind == HOST and arg.on_host and arg.shape == (3, 4) and arg.dtype == "float32"
    assert arg.ptr == a.ctypes.data


def test_non_contiguous_is_named():
    a = np.zeros((4, 3), np.float32).T
    with pytest.raises(InvalidArgument, match="A is not C-contiguous"):
        describe("A", a)
    with pytest.raises(InvalidArgument, match="B is not C-contiguous"):
        describe("B", FakeDeviceArray((4, 3), strides=(4, 16)))


def test_cuda_array_interface():
    arg = describe("B", FakeDeviceArray((4, 3), strides=(12, 4), stream=5))
    assert arg.kind == CAI and not arg.on_host and arg.shape == (4, 3) and arg.dtype == "float32"
    assert arg.stream == 5
    assert describe("B", FakeDeviceArray((4, 3), stream=1)).stream is None  # the legacy default stream
    assert describe("C", FakeDeviceArray((2, 2), readonly=True)).readonly


def test_malformed_interface():
    bad = FakeDeviceArray((2, 2))
    del bad.__cuda_array_interface__["typestr"]
    with pytest.raises(InvalidType, match="malformed __cuda_array_interface__"):
        describe("A", bad)


@pytest.mark.parametrize("value", [[[1.0, 2.0]], 3.0, "A", None])
def test_not_an_array(value):
    with pytest.raises(InvalidType, match="^A is a"):
        describe("A", value)


def test_check_matches_names_the_argument():
    arg = describe("A", np.zeros((3, 4), np.float64))
    with pytest.raises(InvalidType, match="A has dtype float64, expected float32"):
        check_matches(arg, (3, 4), "float32")
    arg = describe("B", np.zeros((3, 4), np.float32))
    with pytest.raises(InvalidArgument, match=r"B has shape \(3, 4\), expected \(4, 3\)"):
        check_matches(arg, (4, 3), "float32")
    check_matches(arg, (3, 4), "float32")


def test_gemm_infers_its_shape_and_explains_mismatches():
    from autotune.spaces import get_space

    space = get_space("gemm")
    assert space.infer_shape({"A": (5, 7), "B": (7, 3)}) == (5, 3, 7)
    with pytest.raises(InvalidArgument, match="B has 6 rows but A has 7 columns"):
        space.infer_shape({"A": (5, 7), "B": (6, 3)})
    with pytest.raises(InvalidArgument, match="A must be a 2-D matrix"):
        space.infer_shape({"A": (5, 7, 1), "B": (7, 3)})
    with pytest.raises(InvalidArgument, match="B is empty"):
        space.infer_shape({"A": (5, 2), "B": (2, 0)})


def test_stream_handles():
    class TorchLike:
        cuda_stream = 1234

    class CupyLike:
        ptr = 99

    class Protocol:
        def __cuda_stream__(self):
            return (0, 77)

    assert stream_handle(None) == 0 and stream_handle(5) == 5
    assert stream_handle(TorchLike()) == 1234 and stream_handle(CupyLike()) == 99 and stream_handle(Protocol()) == 77
    with pytest.raises(InvalidType, match="stream is a str"):
        stream_handle("fast")
