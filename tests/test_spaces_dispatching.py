"""The dispatcher's hooks of `KernelSpace` that every space shares (autotune/spaces/dispatching.py): the leading
dims of N-D activations, folded into the kernel's first dim and given back to the outputs that carry them."""

from __future__ import annotations

import pytest

from autotune.errors import InvalidArgument
from autotune.spaces import space_class


def test_leading_dims_fold_into_the_first_and_come_back_on_the_outputs():
    space = space_class("layernorm")
    flat, leading = space.flatten_leading({"x": (4, 8, 96), "weight": (96,), "bias": (96,)})
    assert flat == {"x": (32, 96), "weight": (96,), "bias": (96,)} and leading == (4, 8)
    assert space.leading_shape("y", (32, 96), leading) == (4, 8, 96)
    assert space.leading_shape("mean", (32,), leading) == (4, 8)
    backward = space_class("layernorm_backward")
    flat, leading = backward.flatten_leading({"dy": (4, 8, 96), "x": (4, 8, 96), "weight": (96,), "mean": (4, 8),
                                              "rstd": (4, 8)})  # fmt: skip
    assert flat["mean"] == (32,) and flat["x"] == (32, 96) and flat["dy"] == (32, 96)
    assert backward.leading_shape("dweight", (96,), leading) == (96,)  # a weight's gradient takes none


def test_exact_ranks_pass_unchanged():
    space = space_class("gemm")
    shapes = {"A": (33, 17), "B": (17, 65)}
    assert space.flatten_leading(shapes) == (shapes, None)
    assert space.leading_shape("C", (33, 65), None) == (33, 65)


def test_gemm_tn_folds_the_tokens_of_both_operands():
    space = space_class("gemm_tn")
    flat, leading = space.flatten_leading({"A": (2, 3, 33), "B": (2, 3, 65)})
    assert flat == {"A": (6, 33), "B": (6, 65)} and leading == (2, 3)
    assert space.leading_shape("C", (33, 65), leading) == (33, 65)  # C is (M, N): no tokens left
    with pytest.raises(InvalidArgument, match="B has leading dims"):
        space.flatten_leading({"A": (2, 3, 33), "B": (3, 2, 65)})


def test_spaces_without_the_declaration_keep_exact_shapes():
    space = space_class("attention")
    shapes = {"q": (1, 2, 64, 64), "k": (1, 2, 64, 64), "v": (1, 2, 64, 64)}
    assert space.flatten_leading(shapes) == (shapes, None)
