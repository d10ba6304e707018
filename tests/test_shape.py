import pytest

from autotune.errors import InvalidArgument
from autotune.shape import format_shape, parse_shape

DIMS = ("M", "N", "K")


@pytest.mark.parametrize(
    "text, expected",
    [("4096x4096x4096", (4096, 4096, 4096)), (" 1x2x3 ", (1, 2, 3)), ("33×65×17", (33, 65, 17)), ("7,8,9", (7, 8, 9))],
)
def test_parse(text, expected):
    assert parse_shape(text, DIMS) == expected
    assert parse_shape(format_shape(expected), DIMS) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("4096x", "malformed"),
        ("abc", "malformed"),
        ("", "malformed"),
        ("1x2", "malformed"),
        ("1x2x3x4", "malformed"),
        ("1.5x2x3", "malformed"),
        ("-1x2x3", "M must be a positive integer"),
        ("0x1x1", "M must be a positive integer"),
        ("1x0x1", "N must be a positive integer"),
        ("1x1x99999999999999", "implausibly large"),
    ],
)
def test_bad_shapes_are_one_clear_error(text, message):
    with pytest.raises(InvalidArgument, match=message) as info:
        parse_shape(text, DIMS)
    assert "\n" not in str(info.value)


def test_a_range_is_its_ends_and_the_powers_of_two_between():
    from autotune.shape import bucket_points, expand_range, is_range

    assert bucket_points(1, 8192) == [2**i for i in range(14)]
    assert bucket_points(100, 1000) == [100, 128, 256, 512, 1000]
    assert bucket_points(3, 3 + 1) == [3, 4]
    shapes = expand_range("1-8192x4096x4096", DIMS)
    assert len(shapes) == 14 and shapes[0] == (1, 4096, 4096) and shapes[-1] == (8192, 4096, 4096)
    assert expand_range("100-300 x 64-128 x 512", DIMS) == [
        (100, 64, 512), (100, 128, 512), (128, 64, 512), (128, 128, 512),
        (256, 64, 512), (256, 128, 512), (300, 64, 512), (300, 128, 512)]  # fmt: skip
    assert is_range("1-8x2x3") and not is_range("4096x4096x4096") and not is_range("-1x2x3")


@pytest.mark.parametrize(
    "text, message",
    [
        ("8192-1x4096x4096", "write the smaller end first"),
        ("64-64x1x1", "write the smaller end first"),
        ("0-64x1x1", "M must be a positive integer"),
        ("1-8192x1-8192x4096", "makes 196 buckets; at most 64"),
        ("1-8x4096", "malformed shape range"),
        ("1-8xax1", "malformed"),
    ],
)
def test_a_bad_range_is_one_clear_error(text, message):
    from autotune.shape import expand_range

    with pytest.raises(InvalidArgument, match=message) as info:
        expand_range(text, DIMS)
    assert "\n" not in str(info.value)
