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
